-- Session.ReleaseBatch: the release script for each lease of the batch, in
-- order, in one atomic call. release_one, which precedes this, is
-- release.lua as a function of its arguments (see scripts.go); the clock is
-- read once, at the start of the batch.
--
-- Four arguments per lease from ARGV[3]: its name, its token, and for a
-- partition its group and index ('' and 0 otherwise). Reply: BATCH and one
-- release reply per lease, in order; or EXPIRED, if the session has
-- expired (its expiry is the same for every lease).

local out, a = {'BATCH'}, {ARGV[1], ARGV[2]}
for i = 3, #ARGV, 4 do
  a[3], a[4] = ARGV[i], ARGV[i + 1]
  if ARGV[i + 2] ~= '' then a[5], a[6] = ARGV[i + 2], ARGV[i + 3] else a[5], a[6] = nil, nil end
  local r = release_one(a)
  if i == 3 and r[1] == 'EXPIRED' then return r end
  out[#out + 1] = r
end
return out
