-- reap ends sessions whose expiry has passed, the oldest first, within
-- one budget. The renewal scripts call it, so that leases and
-- memberships of crashed nodes are released within one renewal period
-- of any node (or a few, for a crashed node that held more than the
-- budget).

local function reap()
  local budget, done = REAP_BUDGET, true
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', SESSIONS, '-inf', NOW, 'LIMIT', 0, REAP_SESSIONS)) do
    budget, done = end_session(id, budget)
    if not done then return end
  end
end
