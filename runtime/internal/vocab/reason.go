package vocab

// Reason says why a term or a session ended (T4). A Reason is also an
// error, so that it can be the cause of a term's context:
//
//	errors.Is(context.Cause(t.Context()), runtime.ReasonDeadlinePassed)
type Reason int32

const (
	// ReasonNotEnded is the Reason of a term that has not ended.
	ReasonNotEnded Reason = iota
	// ReasonStopped: the election was stopped, the lock released, or the client closed.
	ReasonStopped
	// ReasonSteppedDown: the election stepped down.
	ReasonSteppedDown
	// ReasonDeadlinePassed: the session's local deadline passed with no successful renewal.
	ReasonDeadlinePassed
	// ReasonSessionExpired: the backend reported the session expired.
	ReasonSessionExpired
	// ReasonTakenOver: a renewal showed the lease is no longer this session's.
	ReasonTakenOver
)

var reasonNames = [...]string{"not ended", "stopped", "stepped down", "deadline passed", "session expired", "taken over"}

// String returns the reason in words, as in "deadline passed".
func (r Reason) String() string {
	if r < 0 || int(r) >= len(reasonNames) {
		return "unknown reason"
	}
	return reasonNames[r]
}

// Error makes a Reason usable as a context cancellation cause; it is the same
// as String, so that a Reason prints as words either way.
func (r Reason) Error() string { return r.String() }
