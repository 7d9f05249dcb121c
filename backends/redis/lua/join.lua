-- Session.Join.
--
-- ARGV[3]: the group; ARGV[4]: its partition count; ARGV[5]: the node id
-- of the backend, which a partition's release wakes (lib/wake_members.lua).

if not alive(SID) then return {'EXPIRED'} end
local g, n = ARGV[3], ARGV[4]
prune(g)
local parts = redis.call('HGET', P .. '$GROUP' .. g, 'parts')
if parts and parts ~= n then return {'MISMATCH', tonumber(parts)} end
if ARGV[5] and ARGV[5] ~= '' then redis.call('HSET', P .. '$MEMBERNODES' .. g, SID, ARGV[5]) end
if redis.call('SISMEMBER', P .. '$MEMBERS' .. g, SID) == 1 then return {'OK'} end
redis.call('SADD', P .. '$MEMBERS' .. g, SID)
redis.call('SADD', P .. '$JOINED' .. SID, g)
redis.call('HSET', P .. '$GROUP' .. g, 'parts', n, 'epoch', next_rev())
return {'OK'}
