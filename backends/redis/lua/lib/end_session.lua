-- end_session releases what session id holds, waking watchers and
-- telling followers (lib/tell.lua), ends
-- its memberships, and deletes it, once the session is dead (closed or
-- expired) — but at most budget leases and memberships per call, so
-- that no call blocks Redis for long. It returns the budget left, and
-- whether it finished. A session not finished stays in the sessions
-- set, dead (its expiry is past), and later calls go on: until then,
-- what it still holds on record is free to others (acquire and members
-- check that the holder is alive). The lease records of a page are read
-- in one HMGET and deleted in one HDEL.

local function end_session(id, budget)
  local ok, jk = P .. '$OWNED' .. id, P .. '$JOINED' .. id
  if budget > 0 then
    local names = redis.call('ZRANGE', ok, 0, budget - 1)
    if #names > 0 then
      local fields = {}
      for i, name in ipairs(names) do
        fields[3 * i - 2], fields[3 * i - 1], fields[3 * i] = '$HOLDER' .. name, '$WAITING' .. name, '$FOLLOWED' .. name
      end
      local recs = redis.call('HMGET', META, unpack(fields))
      local free = {}
      for i, name in ipairs(names) do
        if recs[3 * i - 2] == id then
          free[#free + 1], free[#free + 2] = '$HOLDER' .. name, '$TOKEN' .. name
          local g = touch_partition(name, nil)
          if g then wake_members(g, name, id) end
          if recs[3 * i - 1] then wake(name, id) end
          if recs[3 * i] then tell(name, ' e ' .. redis.call('HGET', META, '$TOKEN' .. name) .. ' ' .. name) end
        end
      end
      if #free > 0 then redis.call('HDEL', META, unpack(free)) end -- values, if any, stay
      redis.call('ZREMRANGEBYRANK', ok, 0, #names - 1)
      budget = budget - #names
    end
  end
  if budget > 0 then
    local groups = redis.call('SPOP', jk, budget)
    for _, g in ipairs(groups) do leave_group(id, g) end
    budget = budget - #groups
  end
  if redis.call('EXISTS', ok, jk) > 0 then return budget, false end
  redis.call('HDEL', META, '$EXPIRY' .. id, '$TTL' .. id, '$LEASES' .. id, '$VERSION' .. id, '$LEAVE' .. id,
    '$IDENTITY' .. id)
  redis.call('ZREM', SESSIONS, id)
  return budget, true
end
