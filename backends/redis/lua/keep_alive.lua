-- Session.KeepAlive: reaps, then renews the session for its granted time
-- to live from Redis's clock, unless it expired. Reply: as open's.

local bad, m = check_meta('$EXPIRY' .. SID, '$TTL' .. SID, '$LEASES' .. SID, '$VERSION' .. SID, '$LEAVE' .. SID)
if bad then return bad end
reap()
if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
local ttl = tonumber(m[6])
set_expiry(SID, NOW + ttl)
return renewal(SID, ttl, m[7], m[8], m[9])
