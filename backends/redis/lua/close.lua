-- Session.Close.
--
-- Ends the session at once, and releases what it holds within one
-- budget; MORE: call again to go on.

local e = redis.call('ZSCORE', SESSIONS, SID)
if not e then return {'OK'} end
if tonumber(e) > 0 then end_now(SID) end
local _, done = end_session(SID, REAP_BUDGET)
if not done then return {'MORE'} end
return {'OK'}
