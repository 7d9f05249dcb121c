package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Sentinel errors, tested with errors.Is. Their messages state a fact
// without a prefix; the errors that wrap them start with "simba: " and say
// which call on which name ("simba: lock "x": client closed").
var (
	// ErrTermExpired is matched by the error of [Term.EnsureValid] when the
	// term will not stay valid long enough; the error is a *TermExpiredError.
	ErrTermExpired = errors.New("term expired")

	// ErrClosed reports a call on a client that is closing or closed.
	ErrClosed = engine.ErrClosed

	// ErrNameInUse reports a name already started on this client by an
	// election, a lock, a schedule or a partition group (L8).
	ErrNameInUse = engine.ErrNameInUse

	// ErrInvalidConfig is matched by the *ConfigError of [Config.Validate].
	ErrInvalidConfig = vocab.ErrInvalidConfig

	// ErrInvalidName is matched by errors about lease names that break
	// T1; it is backends.ErrInvalidName.
	ErrInvalidName = backends.ErrInvalidName

	// ErrLeaseHeld reports that another node holds the lease (TryLock); it
	// is backends.ErrLeaseHeld.
	ErrLeaseHeld = backends.ErrLeaseHeld

	// ErrStopped reports a call on an election, a schedule or a group that
	// was stopped.
	ErrStopped = errors.New("election stopped")

	// ErrNotOwner reports a term passed to a client that did not create it.
	ErrNotOwner = errors.New("term belongs to another client")

	// ErrNilArgument reports a nil context, function, backend or
	// registration passed to the API (or a typed nil: an interface holding
	// a nil pointer). The error that wraps it names the call and the
	// argument; the call does nothing else.
	ErrNilArgument = errors.New("nil argument")

	// ErrNotLeading reports a hand-over asked of an election that holds no
	// term ([Election.HandOver]).
	ErrNotLeading = engine.ErrNotLeading

	// ErrNotCandidate reports a hand-over to a node that does not contend
	// for the name with [AcceptHandOver]; nothing changed.
	ErrNotCandidate = errors.New("not a candidate that accepts a hand-over")
)

// TermExpiredError is returned by [Term.EnsureValid]. It matches
// [ErrTermExpired].
type TermExpiredError struct {
	Name      string        // the lease name
	Token     Token         // the term's token
	Remaining time.Duration // validity left when checked (0 once ended)
	Min       time.Duration // validity asked for
	Reason    Reason        // why the term ended, or ReasonNotEnded
}

// Error implements error.
func (e *TermExpiredError) Error() string {
	if e.Reason != ReasonNotEnded {
		return fmt.Sprintf("simba: term %s#%d ended: %v", e.Name, e.Token, e.Reason)
	}
	return fmt.Sprintf("simba: term %s#%d ends too soon for the step: %v left, need more than %v", e.Name, e.Token, e.Remaining, e.Min)
}

// Is reports whether target is [ErrTermExpired].
func (e *TermExpiredError) Is(target error) bool { return target == ErrTermExpired }

// PanicError is a panic recovered from user code the engine called (a
// callback, a leader task), reported like a returned error (L7).
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("simba: panic: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
