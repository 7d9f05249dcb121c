-- The armed variant of check_meta, for Redis ≥ 7 (see armed.go): the
-- same script with the run id of the Redis process it was loaded into
-- written in as RUN, so that it needs no INFO. It runs only in a process
-- where the guarded check ran first (the arming transaction loads it),
-- and it hands back to the guarded script (ARM) unless the namespace's
-- meta hash still records that process: after a restart, a fail-over,
-- a reload of older data, or a namespace that lost its meta hash.

local MAXLEASE = tonumber(ARGV[3])
local GUARD, TOKEN = 0, 0

local function check_meta(...)
  local m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token', ...)
  if m[1] ~= LAYOUT then
    if m[1] then return {'LAYOUT', m[1]} end
    return {'ARM'}
  end
  if m[2] ~= RUN then return {'ARM'} end
  GUARD, TOKEN = tonumber(m[3] or '0'), tonumber(m[4] or '0')
  return nil, m
end
