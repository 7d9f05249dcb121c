-- set_expiry makes session id expire at e (µs of Redis time); end_now
-- ends it at once. They write the session's expiry in both places: its
-- e: field, which says whether it is alive, and the sessions set, which
-- orders the reaping.

local function set_expiry(id, e)
  redis.call('ZADD', SESSIONS, e, id)
  redis.call('HSET', META, '$EXPIRY' .. id, e)
end
local function end_now(id)
  redis.call('ZADD', SESSIONS, 0, id)
  redis.call('HDEL', META, '$EXPIRY' .. id)
end
