-- wake tells the backends waiting for lease name that session from
-- released it (or ended): only the WAKE that were refused it last, so
-- that a release costs the same however many nodes wait (the others
-- try on their own schedule, or when their refusal told them the
-- holder's expiry). Its callers call it only if the lease's q: field
-- says someone may wait, so that a lease nobody waits for costs no
-- command; it deletes that field once the waiters' set is empty.

local WAKE = $RELEASEWAKES
local function wake(name, from)
  local qk = P .. '$WAITERS' .. name
  local nodes = redis.call('ZREVRANGE', qk, 0, WAKE - 1)
  for _, node in ipairs(nodes) do redis.call('PUBLISH', P .. '$WAKE' .. node, name .. ' ' .. from) end
  if #nodes > 0 then redis.call('ZREM', qk, unpack(nodes)) end
  if #nodes < WAKE then redis.call('HDEL', META, '$WAITING' .. name) end
end
