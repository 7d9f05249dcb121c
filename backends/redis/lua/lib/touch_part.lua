-- Partition i of group g changed holder (holder nil: released): keep
-- the group's holder index, and bump the group's epoch if it has
-- members and i is one of its partitions. Acquire and release get g and
-- i from the client (backends.SplitPartition), sparing Lua the pattern
-- matching.

local function touch_part(g, i, holder)
  if holder then
    redis.call('HSET', P .. '$PARTHOLDERS' .. g, i, holder)
  else
    redis.call('HDEL', P .. '$PARTHOLDERS' .. g, i)
  end
  local parts = tonumber(redis.call('HGET', P .. '$GROUP' .. g, 'parts') or '0')
  if i < parts then redis.call('HSET', P .. '$GROUP' .. g, 'epoch', next_rev()) end
end
