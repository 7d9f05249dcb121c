-- next_rev returns a new namespace-wide revision, the source of group
-- epochs and of sessions' leave revisions.

local function next_rev() return redis.call('HINCRBY', META, 'rev', 1) end
