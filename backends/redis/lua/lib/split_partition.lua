-- The inverse of backends.PartitionName: "group.i" with i decimal, no
-- leading zero, below 65536.

local function split_partition(name)
  local g, d = string.match(name, '^(.+)%.(%d+)$')
  if not g or (#d > 1 and string.sub(d, 1, 1) == '0') or #d > 5 then return nil end
  local i = tonumber(d)
  if i >= 65536 then return nil end
  return g, i
end
