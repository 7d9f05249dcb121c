-- Session.Leave.
--
-- ARGV[3]: the group.

if not alive(SID) then return {'EXPIRED'} end
local g = ARGV[3]
redis.call('SREM', P .. '$JOINED' .. SID, g)
if redis.call('SISMEMBER', P .. '$MEMBERS' .. g, SID) == 1 then
  leave_group(SID, g)
  redis.call('HSET', META, '$LEAVE' .. SID, next_rev())
end
return {'OK'}
