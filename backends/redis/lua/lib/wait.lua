-- wait records that node (a backend, "" for none) waits for lease name,
-- for wake: refused it (rank NOW), or only reading its holder (rank
-- NOW − 2^40 µs, so that readers are woken only when fewer candidates
-- wait than a release wakes). The latest 64 are kept, for 2 × maxLease
-- (µs). It sets the lease's q: field unless flagged says it is set
-- (acquire does not read it: it would cost every grant a field).

local function wait(name, node, rank, maxLease, flagged)
  if node == '' then return end
  local qk = P .. '$WAITERS' .. name
  redis.call('ZADD', qk, rank, node)
  if redis.call('ZCARD', qk) > 64 then redis.call('ZREMRANGEBYRANK', qk, 0, -65) end
  redis.call('PEXPIRE', qk, math.floor(maxLease / 500))
  if not flagged then redis.call('HSET', META, '$WAITING' .. name, 1) end
end
