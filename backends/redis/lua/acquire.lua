-- Session.Acquire: one atomic round trip, guarded (check_meta).
--
-- ARGV[4]: the lease name; ARGV[5]: the node id of the backend, which a
-- release wakes if it is refused (lib/wait.lua); ARGV[6] and ARGV[7], for a
-- partition: its group and index. A grant of a lease some backend
-- follows (its f: field, read in the same HMGET) is told to them
-- (lib/tell.lua). Reply: OK, the token, the digest's
-- leases and version, and the value if there is one; or HELD and the
-- holder (see lib/holder.lua); or RECOVERING, the time left of the amnesia
-- guard and its end (µs of Redis time).
--
-- Granting a free lease takes four commands: the clock, one HMGET (the
-- guard's fields, the session's expiry and digest, the lease's record
-- and value), one HSET (the token counter, the record, the digest) and
-- one ZADD (the session's owned set, which Owned and the reapers read).
-- Numbers it writes are formatted once, with string.format('%d'):
-- redis.call would format each with %.17g, which costs more.

local name = ARGV[4]
local fh, ft = '$HOLDER' .. name, '$TOKEN' .. name
local fn, fv = '$LEASES' .. SID, '$VERSION' .. SID
local bad, m = check_meta('$EXPIRY' .. SID, fn, fv, fh, ft, '$VALUE' .. name, '$FOLLOWED' .. name)
if bad then return bad end
if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
local h = m[8]
if h == SID then return {'OK', m[9], m[6] or 0, m[7] or 0, m[10]} end
if h then
  local held = holder(h, m[9])
  if held then
    wait(name, ARGV[5], NOW, MAXLEASE)
    return {'HELD', held[1], held[2], held[3], held[4]}
  end
end
if NOW < GUARD then
  wait(name, ARGV[5], NOW, MAXLEASE)
  return {'RECOVERING', GUARD - NOW, GUARD}
end
local tok = math.max(TOKEN + 1, NOW)
if tok > 9007199254740991 then return {'TOKENS'} end -- 2^53-1
local ts = string.format('%d', tok)
local n, v = tonumber(m[6] or '0') + 1, tonumber(m[7] or '0') + 1
redis.call('HSET', META, 'token', ts, fh, SID, ft, ts, fn, string.format('%d', n), fv, string.format('%d', v))
redis.call('ZADD', P .. '$OWNED' .. SID, ts, name)
if ARGV[6] then touch_part(ARGV[6], tonumber(ARGV[7]), SID) end
if m[11] then
  tell(name, ' g ' .. ts .. ' ' .. string.format('%d', tonumber(m[5]) - NOW) .. ' ' .. SID .. ' ' .. name .. ' ' ..
    (redis.call('HGET', META, '$IDENTITY' .. SID) or ''))
end
return {'OK', tok, n, v, m[10]}
