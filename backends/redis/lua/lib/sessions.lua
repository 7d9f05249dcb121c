-- The sessions sorted set of the namespace (keys.go): session id → expiry.
local SESSIONS = P .. '$SESSIONS'
