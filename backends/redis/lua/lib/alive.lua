-- alive reports whether session id is alive by Redis's clock. A dead
-- session is left to the reapers (end_session). The hot scripts read
-- the e: field with their other fields instead.

local function alive(id)
  local e = redis.call('HGET', META, '$EXPIRY' .. id)
  return e and tonumber(e) > NOW
end
