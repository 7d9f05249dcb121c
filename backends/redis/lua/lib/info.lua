-- INFO server, read once by the guarded scripts: the run id of the
-- process (check_meta), its uptime, its version, and its clock
-- (info_now.lua).

local INFO = redis.call('INFO', 'server')
