-- The same, from the lease name.

local function touch_partition(name, holder)
  local g, i = split_partition(name)
  if g then touch_part(g, i, holder) end
end
