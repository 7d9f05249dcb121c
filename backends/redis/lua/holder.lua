-- Session.Holder.
--
-- ARGV[3]: the lease name; ARGV[4]: the node id of the backend, which
-- the next release wakes if few candidates wait (lib/wait.lua); ARGV[5]:
-- MaxLease in µs. Reply: OK and the holder (see lib/holder.lua), or OK alone
-- if the lease is free.

local name = ARGV[3]
local m = redis.call('HMGET', META, '$EXPIRY' .. SID, '$HOLDER' .. name, '$TOKEN' .. name, '$WAITING' .. name)
if tonumber(m[1] or '0') <= NOW then return {'EXPIRED'} end
local h = m[2] and holder(m[2], m[3])
if h then
  wait(name, ARGV[4], NOW - 1099511627776, tonumber(ARGV[5]), m[4])
  return {'OK', h[1], h[2], h[3], h[4]}
end
return {'OK'}
