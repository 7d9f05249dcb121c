-- Session.Owned, a page at a time, guarded (check_meta).
--
-- ARGV[4], ARGV[5]: the first rank and the number of entries of the
-- page to read. Reply: as keep-alive's, then the page (name, token, …).

local bad, m = check_meta('$EXPIRY' .. SID, '$LEASES' .. SID, '$VERSION' .. SID, '$LEAVE' .. SID)
if bad then return bad end
reap()
if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
local r = renewal(SID, 0, m[6], m[7], m[8])
local first = tonumber(ARGV[4])
r[7] = redis.call('ZRANGE', P .. '$OWNED' .. SID, first, first + tonumber(ARGV[5]) - 1, 'WITHSCORES')
return r
