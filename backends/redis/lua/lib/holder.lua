-- holder describes session id, the holder on record of a lease with
-- token tok, if it is alive: its id, token, remaining time (µs) and
-- identity.

local function holder(id, tok)
  local s = redis.call('HMGET', META, '$EXPIRY' .. id, '$IDENTITY' .. id)
  local e = tonumber(s[1] or '0')
  if e <= NOW then return nil end
  return {id, tonumber(tok), e - NOW, s[2] or ''}
end
