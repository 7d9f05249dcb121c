package fencing

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
)

// ErrGateClosed reports a write that a [Gate] refused, because its term had
// ended or would not stay valid for the gate's minimum, or cancelled in
// flight, because its term ended while it ran. The error is a *GateError,
// which says which. Test it with errors.Is.
var ErrGateClosed = errors.New("simba: write gate closed")

// Term is the term a [Gate] lets writes through for. *runtime.Term
// satisfies it; the interface is this package's, so that fencing does not
// import runtime (§12).
type Term interface {
	// Name returns the lease name.
	Name() string
	// Token returns the term's fencing token.
	Token() backends.Token
	// EnsureValid returns nil if the term stays valid for more than min,
	// and an error saying why not otherwise (E1).
	EnsureValid(min time.Duration) error
	// Context returns a context that is cancelled when the term ends, with
	// the reason as its cause.
	Context() context.Context
}

// Gate lets a write start only while its term stays valid for more than
// Min, and cancels the write in flight when the term ends: the write gate
// of a leader (E1, E2). [Transport] puts it in front of an HTTP client,
// [Connector] in front of a database/sql driver, and [Gate.Do] in front of
// anything else that takes a context (a gRPC call, a message producer).
//
// A gate narrows the window in which a former holder can write; it cannot
// close it. A write that has left the process before the term ended (a
// request on the wire, a COMMIT the database has received) cannot be called
// back, and a process that pauses between the gate's check and its send
// sends after its term ended. Only the resource's own check of the token
// closes the window (F1): send the term's token, or its [Sequencer], with
// the write and have the resource refuse stale ones ([Sequencers],
// [SequencerHandler], the recipes of this package).
//
// A Gate is a value: copy it freely. It belongs to one term, so a leader
// builds one per term; a write of an old term never passes under a new
// one.
type Gate struct {
	// Term is the term whose writes pass. Required.
	Term Term
	// Min is the validity a write needs when it starts: the gate lets it
	// through only if Term.EnsureValid(Min) returns nil. 0 lets writes
	// through for as long as the term is valid at all. Negative is an
	// error.
	Min time.Duration
}

// GateError is the error of a write that a [Gate] refused or cancelled. It
// matches [ErrGateClosed] with errors.Is, and unwraps to the term's
// EnsureValid error (a *runtime.TermExpiredError, matching
// runtime.ErrTermExpired), to the write's own error, and to the reason the
// term ended (a runtime.Reason), whichever are there.
type GateError struct {
	Name  string         // the term's lease name
	Token backends.Token // the term's fencing token
	Op    string         // the write: an HTTP method, or Exec, Query, Begin or Commit for SQL

	// InFlight is false for a write refused before it started, which
	// changed nothing, and true for a write cancelled while it ran, whose
	// outcome is unknown: the resource may have applied it.
	InFlight bool

	// Err is, for a refused write, the term's EnsureValid error, and for a
	// write cancelled in flight, the write's own error.
	Err error

	// Reason is the cause of the term's context (a runtime.Reason for a
	// runtime term) if the term had ended, nil otherwise.
	Reason error
}

// Error implements error: "simba: write gate: POST refused: term report#42
// ended: stepped down", or "… POST cancelled in flight: …".
func (e *GateError) Error() string {
	what := "refused"
	if e.InFlight {
		what = "cancelled in flight, outcome unknown"
	}
	if e.Reason != nil {
		return fmt.Sprintf("simba: write gate: %s %s: term %s#%d ended: %v", e.Op, what, e.Name, e.Token, e.Reason)
	}
	return fmt.Sprintf("simba: write gate: %s %s: %v", e.Op, what, e.Err)
}

// Is reports whether target is [ErrGateClosed].
func (e *GateError) Is(target error) bool { return target == ErrGateClosed }

// Unwrap returns Err and Reason, those that are not nil.
func (e *GateError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Err, e.Reason} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// validate reports a gate that cannot work, naming the field.
func (g Gate) validate() error {
	switch {
	case g.Term == nil:
		return errors.New("simba: fencing.Gate: Term is nil; set it to the term whose writes the gate lets through")
	case g.Min < 0:
		return fmt.Errorf("simba: fencing.Gate: Min is %v; want 0 or more", g.Min)
	}
	return nil
}

// Check returns nil if a write named op may start now: the term stays valid
// for more than Min. Otherwise it returns a *GateError (matching
// [ErrGateClosed]) that names op. A gate with a nil Term or a negative Min
// gives an error that says so, not matching ErrGateClosed.
//
// Check alone does not cancel anything; [Gate.Do] does.
func (g Gate) Check(op string) error {
	if err := g.validate(); err != nil {
		return err
	}
	err := g.Term.EnsureValid(g.Min)
	if err == nil {
		return nil
	}
	ge := &GateError{Name: g.Term.Name(), Token: g.Term.Token(), Op: op, Err: err}
	if tc := g.Term.Context(); tc.Err() != nil {
		ge.Reason = context.Cause(tc)
	}
	return ge
}

// Do runs write if [Gate.Check] lets op start, with a context that is ctx
// cancelled also when the term ends. If the term ends while write runs and
// write returns an error, Do returns a *GateError with InFlight set, which
// wraps write's error and the term's reason; write's other results stand
// as they are (a write that succeeded as the term ended did happen).
//
// write should give up promptly once its context is done, as calls of
// net/http, database/sql and gRPC do.
func (g Gate) Do(ctx context.Context, op string, write func(ctx context.Context) error) error {
	if err := g.Check(op); err != nil {
		return err
	}
	if write == nil {
		return errors.New("simba: fencing.Gate.Do: nil write function")
	}
	wctx, release := g.join(ctx, op)
	defer release()
	return g.inFlight(wctx, write(wctx))
}

// join returns ctx joined with the term's end: when the term ends, the
// context is cancelled with a *GateError (InFlight) as its cause. release
// must be called once the write is over; it cancels the context.
func (g Gate) join(ctx context.Context, op string) (joined context.Context, release func()) {
	tc := g.Term.Context()
	joined, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(tc, func() {
		cancel(&GateError{Name: g.Term.Name(), Token: g.Term.Token(), Op: op, InFlight: true, Reason: context.Cause(tc)})
	})
	return joined, func() {
		stop()
		cancel(nil)
	}
}

// inFlight returns err as a *GateError with InFlight set if the term's end
// cancelled joined (a context from join), and err as it is otherwise. A
// nil err stays nil. So does an error that database/sql retries on another
// connection (driver.ErrBadConn: the driver did not send the write), which
// must stay recognisable as such; the retry meets the closed gate.
func (g Gate) inFlight(joined context.Context, err error) error {
	if err == nil || joined.Err() == nil || errors.Is(err, driver.ErrBadConn) {
		return err
	}
	var cause *GateError
	if !errors.As(context.Cause(joined), &cause) || !cause.InFlight {
		return err
	}
	ge := *cause
	ge.Err = err
	return &ge
}

// kind is what a caller marked a call as, with AsRead or AsWrite.
type kind int

const (
	unmarked kind = iota
	markedRead
	markedWrite
)

type kindKey struct{}

// AsRead returns a context that marks the call made with it as a read, which
// a gate lets pass whatever the state of the term: a POST that only
// searches, an Exec that only sets a session variable. The mark overrides
// how [Transport] and [Connector] tell reads from writes. Mark only what
// changes nothing: a write marked as a read escapes the gate.
func AsRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, kindKey{}, markedRead)
}

// AsWrite returns a context that marks the call made with it as a write,
// which a gate refuses once the term ends and cancels in flight: a GET with
// side effects, a Query that writes (INSERT … RETURNING, a function that
// changes data). The mark overrides how [Transport] and [Connector] tell
// reads from writes.
func AsWrite(ctx context.Context) context.Context {
	return context.WithValue(ctx, kindKey{}, markedWrite)
}

// markOf returns the mark AsRead or AsWrite put on ctx, if any.
func markOf(ctx context.Context) kind {
	k, _ := ctx.Value(kindKey{}).(kind)
	return k
}
