-- The amnesia guard (§15). A Redis process that restarted without
-- its data, reloaded an older snapshot, or is a replica promoted after
-- a fail-over may have forgotten leases that clients still believe they
-- hold. Every guarded script compares the run id of the process it runs
-- in (INFO, read inside the script, so in the same process) with the
-- one recorded in the namespace's meta hash, on every call: the script
-- cache is shared by every namespace of a Redis (the prefix is an
-- argument), and Redis < 7 even saves it with the data, so no reply the
-- client gets tells it reliably that it talks to a new process. On a
-- mismatch, or when the meta hash is missing, nothing in the namespace
-- can be trusted: every session is ended, and no lease is granted until
-- MaxLease has passed since the loss, by when every old holder's local
-- deadline has passed. Reading INFO costs a few µs; only the guarded
-- scripts pay it, and on Redis ≥ 7 their armed variants do not (see
-- lib/armed_meta.lua).
--
-- check_meta(...) reads the meta hash's layout, run, guard and token,
-- and the script's own fields (...) after them in the same HMGET. It
-- returns an error reply, or nil and the fields read (m[5] is the
-- first of the script's own), read again after a loss ended every
-- session.

local MAXLEASE = tonumber(ARGV[3])
local GUARD, TOKEN = 0, 0 -- from the meta hash, read by check_meta
local RUN_ID = '?'        -- the run id of this process, from INFO

local function lost(m)
  local guard
  if m[1] or redis.call('ZCARD', SESSIONS) > 0 then
    -- Another process, or a namespace that lost its meta hash only: the
    -- loss happened at the latest now.
    guard = NOW + MAXLEASE
  else
    -- An empty namespace: new, or lost in a restart. A restart happened
    -- at the latest when this process booted, and before now. INFO's
    -- uptime is the difference of two whole seconds, up to a second more
    -- than the time since boot: count a second less.
    local up = tonumber(string.match(INFO, 'uptime_in_seconds:(%d+)') or '0')
    guard = NOW - math.max(0, up - 1) * 1000000 + MAXLEASE
  end
  local old = tonumber(m[3] or '0')
  if old > guard then guard = old end
  -- Every session ends: an expiry of 0 is past, and the reapers release
  -- what they held.
  redis.call('ZUNIONSTORE', SESSIONS, 1, SESSIONS, 'WEIGHTS', 0)
  local ids = redis.call('ZRANGE', SESSIONS, 0, -1)
  for i = 1, #ids, 1000 do
    local f = {}
    for j = i, math.min(i + 999, #ids) do f[#f + 1] = '$EXPIRY' .. ids[j] end
    redis.call('HDEL', META, unpack(f))
  end
  redis.call('HSET', META, 'layout', LAYOUT, 'run', RUN_ID, 'guard', guard, 'about', ABOUT)
end

local function check_meta(...)
  local m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token', ...)
  if m[1] and m[1] ~= LAYOUT then return {'LAYOUT', m[1]} end
  local at = string.find(INFO, 'run_id:', 1, true)
  RUN_ID = at and string.match(INFO, '^%x+', at + 7) or '?'
  if not (m[1] and m[2] == RUN_ID) then
    lost(m)
    m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token', ...)
  end
  GUARD, TOKEN = tonumber(m[3] or '0'), tonumber(m[4] or '0')
  return nil, m
end
