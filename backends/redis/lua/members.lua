-- Session.Members.
--
-- ARGV[3]: the group. Reply: OK, partitions, members, holders as a flat
-- list of partition index and session id.

reap()
if not alive(SID) then return {'EXPIRED'} end
local g = ARGV[3]
prune(g)
local parts = tonumber(redis.call('HGET', P .. '$GROUP' .. g, 'parts') or '0')
if parts == 0 then return {'OK', 0, {}, {}} end
local holders = {}
local h = redis.call('HGETALL', P .. '$PARTHOLDERS' .. g)
for i = 1, #h, 2 do
  if tonumber(h[i]) < parts and alive(h[i + 1]) then
    holders[#holders + 1] = h[i]
    holders[#holders + 1] = h[i + 1]
  end
end
return {'OK', parts, redis.call('SMEMBERS', P .. '$MEMBERS' .. g), holders}
