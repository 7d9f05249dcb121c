-- The guarded acquire reads INFO anyway (the amnesia guard): its
-- server_time_usec is Redis's clock at the start of the call, which
-- spares a TIME. It may be earlier than TIME (by the script's time so
-- far), never later, and every use acquire makes of NOW is safe with an
-- earlier clock: a holder's expiry looks later (refuse rather than
-- grant), the guard longer, and tokens stay max(last+1, NOW), above the
-- guard's end after a loss. The renewal scripts keep TIME: they send NOW
-- back as the base of a deadline. An older Redis whose INFO lacks
-- server_time_usec: TIME then. (The armed acquire reads no INFO, and
-- TIME.)

local at = string.find(INFO, 'server_time_usec:', 1, true)
local NOW = at and tonumber(string.match(INFO, '^%d+', at + 17))
if not NOW then
  local clock = redis.call('TIME')
  NOW = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end
