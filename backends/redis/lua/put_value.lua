-- Session.PutValue.
--
-- ARGV[3]: the lease name; ARGV[4]: the token; ARGV[5]: the value.

local name = ARGV[3]
local m = redis.call('HMGET', META, '$EXPIRY' .. SID, '$HOLDER' .. name, '$TOKEN' .. name)
if tonumber(m[1] or '0') <= NOW then return {'EXPIRED'} end
if m[2] ~= SID or m[3] ~= ARGV[4] then return {'NOTHOLDER'} end
redis.call('HSET', META, '$VALUE' .. name, ARGV[5])
return {'OK'}
