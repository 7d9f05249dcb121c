-- Session.AcquireBatch: the acquire script for each lease of the batch, in
-- order, in one atomic call. acquire_one, which precedes this, is
-- acquire.lua as a function of its arguments (see scripts.go), so that each
-- lease is handled exactly as a call of its own would handle it; the clock
-- is read once, at the start of the batch.
--
-- ARGV[4]: the node id of the backend; then three per lease: its name, and
-- for a partition its group and index ('' and 0 otherwise). Reply: BATCH
-- and one acquire reply per lease, in order; or, if the first lease's reply
-- is one that every lease would get (ARM, LAYOUT, EXPIRED: the meta hash
-- and the session's expiry are the same for all), that reply alone.

local out, a = {'BATCH'}, {ARGV[1], ARGV[2], ARGV[3]}
for i = 5, #ARGV, 3 do
  a[4], a[5] = ARGV[i], ARGV[4]
  if ARGV[i + 1] ~= '' then a[6], a[7] = ARGV[i + 1], ARGV[i + 2] else a[6], a[7] = nil, nil end
  local r = acquire_one(a)
  if i == 5 and (r[1] == 'ARM' or r[1] == 'LAYOUT' or r[1] == 'EXPIRED') then return r end
  out[#out + 1] = r
end
return out
