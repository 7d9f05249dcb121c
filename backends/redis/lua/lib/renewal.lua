-- The reply of OpenSession, KeepAlive and Owned: status, remaining
-- (µs), now (µs), and the digest: leases n and version v (the
-- session's n: and r: fields), and groups, from mrev (its m: field) and
-- the epochs of the groups it joined. Its cost grows with the groups
-- joined, never with the leases held (S1).

local function renewal(id, remaining, n, v, mrev)
  local groups = tonumber(mrev or '0')
  for _, g in ipairs(redis.call('SMEMBERS', P .. '$JOINED' .. id)) do
    local e = tonumber(redis.call('HGET', P .. '$GROUP' .. g, 'epoch') or '0')
    if e > groups then groups = e end
  end
  return {'OK', remaining, NOW, tonumber(n or '0'), tonumber(v or '0'), groups}
end
