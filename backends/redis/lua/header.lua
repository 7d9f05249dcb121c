-- The header of every script. KEYS[1] is the namespace's meta hash, which
-- routes the call in Redis Cluster; ARGV[1] is the namespace's base
-- ("{prefix}:"), ARGV[2] the calling session's id (empty for check).

local META, P, SID = KEYS[1], ARGV[1], ARGV[2]
