-- Backend.OpenSession, guarded (check_meta).
--
-- ARGV[4]: the granted time to live in µs; ARGV[5]: the identity.
-- Idempotent, so that a retry of a call whose reply was lost does no
-- harm; the session's place in the sessions set is read before reap,
-- which could delete a session that expired, so that a late retry
-- cannot open a session anew.

local bad, m = check_meta('$EXPIRY' .. SID, '$TTL' .. SID, '$LEASES' .. SID, '$VERSION' .. SID, '$LEAVE' .. SID)
if bad then return bad end
local known = redis.call('ZSCORE', SESSIONS, SID)
reap()
local ttl
if known then
  if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
  ttl = tonumber(m[6])
else
  ttl = tonumber(ARGV[4])
  if ARGV[5] == '' then
    redis.call('HSET', META, '$TTL' .. SID, ARGV[4])
  else
    redis.call('HSET', META, '$TTL' .. SID, ARGV[4], '$IDENTITY' .. SID, ARGV[5])
  end
end
set_expiry(SID, NOW + ttl)
return renewal(SID, ttl, m[7], m[8], m[9])
