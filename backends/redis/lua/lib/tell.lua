-- tell sends msg, a change of lease name's holder, to the backends that
-- follow it (follow.lua): those whose marker in {p}:f:<name> has not
-- expired, on their channels. Its callers call it only if the lease's f:
-- field says someone may follow it, so that a lease nobody follows costs
-- no command; it deletes that field once no marker is left.
--
-- Messages start with a space, so that a backend of an older layout
-- ignores them (it reads "name session"): " g <token> <remaining µs>
-- <session> <name> <identity>" for a grant, " e <token> <name>" for the
-- end of the term with that token.

local function tell(name, msg)
  local nodes = redis.call('ZRANGEBYSCORE', P .. '$FOLLOWERS' .. name, NOW, '+inf')
  for _, node in ipairs(nodes) do redis.call('PUBLISH', P .. '$WAKE' .. node, msg) end
  if #nodes == 0 then redis.call('HDEL', META, '$FOLLOWED' .. name) end
end
