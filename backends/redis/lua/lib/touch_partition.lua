-- The same, from the lease name; it returns the group, if name is a
-- partition's.

local function touch_partition(name, holder)
  local g, i = split_partition(name)
  if g then touch_part(g, i, holder) end
  return g
end
