-- prune ends the memberships of group g's members that are not alive.

local function prune(g)
  for _, id in ipairs(redis.call('SMEMBERS', P .. '$MEMBERS' .. g)) do
    if not alive(id) then
      leave_group(id, g)
      redis.call('SREM', P .. '$JOINED' .. id, g)
    end
  end
end
