-- Session.Release.
--
-- ARGV[3]: the lease name; ARGV[4]: the token; ARGV[5] and ARGV[6],
-- for a partition: its group and index. Reply: OK and the digest's
-- leases and version.
--
-- Releasing takes five commands: the clock, one HMGET (the session's
-- expiry and digest, the lease's record, whether anyone waits), one
-- HDEL (the record), one HSET (the digest) and one ZREM (the owned
-- set); and the wake-up, only if someone waits — for a partition, of
-- every member's backend (lib/wake_members.lua); and the end of the
-- term, only if some backend follows the lease (lib/tell.lua).

local name = ARGV[3]
local fh, ft = '$HOLDER' .. name, '$TOKEN' .. name
local fn, fv = '$LEASES' .. SID, '$VERSION' .. SID
local m = redis.call('HMGET', META, '$EXPIRY' .. SID, fn, fv, fh, ft, '$WAITING' .. name, '$FOLLOWED' .. name)
if tonumber(m[1] or '0') <= NOW then return {'EXPIRED'} end
if m[4] ~= SID or m[5] ~= ARGV[4] then return {'OK', m[2] or 0, m[3] or 0} end
local n, v = tonumber(m[2] or '1') - 1, tonumber(m[3] or '0') + 1
redis.call('HDEL', META, fh, ft) -- the value, if any, stays
redis.call('HSET', META, fn, string.format('%d', n), fv, string.format('%d', v))
redis.call('ZREM', P .. '$OWNED' .. SID, name)
if ARGV[5] then
  touch_part(ARGV[5], tonumber(ARGV[6]))
  wake_members(ARGV[5], name, SID)
end
if m[6] then wake(name, SID) end
if m[7] then tell(name, ' e ' .. m[5] .. ' ' .. name) end
return {'OK', n, v}
