-- wake_members tells the backends of group g's members that session from
-- released partition name (or ended holding it), so that the member due
-- to take it does so at once, as a candidate refused a lease is woken
-- (lib/wake.lua): members do not contend for partitions others hold, so
-- no refusal would have put them on the lease's waiters. One PUBLISH per
-- backend with a member, whatever its number of members.

local function wake_members(g, name, from)
  local seen = {}
  for _, node in ipairs(redis.call('HVALS', P .. '$MEMBERNODES' .. g)) do
    if not seen[node] then
      seen[node] = true
      redis.call('PUBLISH', P .. '$WAKE' .. node, name .. ' ' .. from)
    end
  end
end
