package vocab

// SessionState is the state of a client's session (S5).
type SessionState int

const (
	// SessionOpening: no session yet, or opening a new one after the last ended.
	SessionOpening SessionState = iota
	// SessionLive: the last renewal succeeded.
	SessionLive
	// SessionSuspended: the last renewal failed; the local deadline has not passed.
	SessionSuspended
	// SessionClosed: the client was closed.
	SessionClosed
)

var stateNames = [...]string{"opening", "live", "suspended", "closed"}

// String returns the state in words.
func (s SessionState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}
