-- Backend.Check, and the arming transaction (armed.go).
--
-- The header and check_meta: checks the layout and the run id, reaps.
-- Reply: OK, the run id of the process, and its major version.

local bad = check_meta()
if bad then return bad end
reap()
return {'OK', RUN_ID, tonumber(string.match(INFO, 'redis_version:(%d+)') or '0')}
