-- Backend.followHolders: the watch markers of backends.HolderNotifier.
--
-- ARGV[3]: the node id of the backend; ARGV[4]: how long its markers
-- last (µs); ARGV[5] on: the lease names it follows. For each name it
-- sets the node's marker in {p}:f:<name> (a zset of node → deadline, µs
-- of Redis time; the key expires with the latest), drops expired ones,
-- and sets the f: field that makes grants and ends of terms of the name
-- tell the followers (lib/tell.lua). It replies, for each name, its
-- holder as of the same instant (so that nothing after it is lost): OK
-- and, per name, the holder's session, token, remaining time (µs) and
-- identity, or an empty session and the last token the namespace issued
-- (no term of a free lease has a later one).

local node, ttl = ARGV[3], tonumber(ARGV[4])
local layout = redis.call('HGET', META, 'layout')
if layout and layout ~= LAYOUT then return {'LAYOUT', layout} end
local deadline = string.format('%d', NOW + ttl)
local pttl = string.format('%d', math.floor(ttl / 1000))
local out = {'OK'}
for i = 5, #ARGV do
  local name = ARGV[i]
  local fk = P .. '$FOLLOWERS' .. name
  redis.call('ZADD', fk, deadline, node)
  redis.call('ZREMRANGEBYSCORE', fk, '-inf', '(' .. string.format('%d', NOW))
  redis.call('PEXPIRE', fk, pttl)
  local m = redis.call('HMGET', META, '$HOLDER' .. name, '$TOKEN' .. name, 'token')
  local h = m[1] and holder(m[1], m[2])
  if h then
    out[#out + 1] = {h[1], h[2], h[3], h[4]}
  else
    out[#out + 1] = {'', tonumber(m[3] or '0')}
  end
end
redis.call('HSET', META, unpack((function()
  local f = {}
  for i = 5, #ARGV do f[#f + 1], f[#f + 2] = '$FOLLOWED' .. ARGV[i], 1 end
  return f
end)()))
return out
