-- leave_group removes session id from group g's members; the caller
-- removes g from the session's groups.

local function leave_group(id, g)
  redis.call('SREM', P .. '$MEMBERS' .. g, id)
  redis.call('HDEL', P .. '$MEMBERNODES' .. g, id)
  if redis.call('SCARD', P .. '$MEMBERS' .. g) == 0 then
    redis.call('DEL', P .. '$GROUP' .. g, P .. '$MEMBERNODES' .. g)
  else
    redis.call('HSET', P .. '$GROUP' .. g, 'epoch', next_rev())
  end
end
