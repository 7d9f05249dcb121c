-- The most leases and memberships one call releases of sessions that
-- ended, and the most sessions a renewal reaps.

local REAP_BUDGET, REAP_SESSIONS = $REAPBUDGET, $REAPSESSIONS
