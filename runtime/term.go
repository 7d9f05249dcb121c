package runtime

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// mono is a point on the client's monotonic clock, as the time elapsed since
// the client was created. The engine never reads a wall clock.
type mono = time.Duration

// deadline is a session's local deadline (D1), shared by the session's terms
// so that Valid and Remaining are a load and a clock read (T3). epoch is the
// client's: the deadline is a point on the client's monotonic clock.
type deadline struct {
	at    atomic.Int64
	epoch time.Time
}

// now returns the client's monotonic clock (see mono).
func (d *deadline) now() mono { return time.Since(d.epoch) }

func (d *deadline) get() mono  { return mono(d.at.Load()) }
func (d *deadline) set(t mono) { d.at.Store(int64(t)) }

// Term is one period during which this node owns a lease (T2). Winning a
// name twice gives two distinct Terms. All methods are safe for concurrent
// use and never block.
//
// [Term.Valid] and [Term.Remaining] are pure functions of the monotonic clock
// and the session's local deadline: no goroutine has to run first, so a
// process that wakes from a long pause reads false at once, and an ended term
// never becomes valid again (T3).
type Term struct {
	name     string
	token    Token
	owner    *driver   // the driver of the client that made it, for Unlock's check
	deadline *deadline // the session's; frozen once the session ended

	endedAt  atomic.Int64 // when Valid became false for good (mono, at least 1); 0 while not ended
	reason   atomic.Int32
	rejected atomic.Bool   // its elected callback could not be dispatched (L6)
	lock     bool          // a lock's term, released with Unlock
	id       engine.TermID // the engine's name for it

	mu  sync.Mutex   // guards sig, and its making and ending
	sig *termSignals // made at the first Done or Context call
}

// termSignals are a term's Done channel and context, each made on demand: a
// client leading a million elections whose terms nobody waits on keeps
// neither.
type termSignals struct {
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newTerm(owner *driver, name string, token Token, d *deadline) *Term {
	return &Term{name: name, token: token, owner: owner, deadline: d}
}

// signals returns t's signals, making them if need be. The caller holds
// t.mu.
func (t *Term) signals() *termSignals {
	if t.sig == nil {
		t.sig = new(termSignals)
	}
	return t.sig
}

// Name returns the lease name.
func (t *Term) Name() string { return t.name }

// Token returns the term's fencing token.
func (t *Term) Token() Token { return t.token }

// ended reports whether the term ended.
func (t *Term) ended() bool { return t.endedAt.Load() != 0 }

// EndedAt returns when the term ended, on this process's clock: the
// moment [Term.Valid] turned false for good — the session's local deadline
// if that passed first, else when the term was revoked (stopped, stepped
// down, released, its session lost). It returns the zero Time while the
// term has not ended, even if its deadline has passed and the client has
// not yet noticed. For logs and tests that order events: a term's end
// comes before its lease is released (H1).
func (t *Term) EndedAt() time.Time {
	at := t.endedAt.Load()
	if at == 0 {
		return time.Time{}
	}
	return t.deadline.epoch.Add(time.Duration(at))
}

// Valid reports whether the term has not ended and the session's local
// deadline has not passed.
func (t *Term) Valid() bool {
	return !t.ended() && t.deadline.now() < t.deadline.get()
}

// Remaining returns the time left until the session's local deadline, or 0
// once the term has ended or the deadline has passed.
func (t *Term) Remaining() time.Duration {
	if t.ended() {
		return 0
	}
	return max(0, t.deadline.get()-t.deadline.now())
}

// EnsureValid returns nil if the term stays valid for more than min, and a
// *TermExpiredError (matching [ErrTermExpired]) otherwise. Call it before a
// step that must not start when the term is about to end (E1). It
// narrows the window in which a stale holder starts work but cannot close it:
// a pause can follow the check, so writes still carry [Term.Token] (E2).
//
// A term that has ended, or whose deadline has passed, fails whatever min
// is: a negative min asks for nothing more than validity now.
func (t *Term) EnsureValid(min time.Duration) error {
	r := t.Remaining()
	if r > 0 && r > min {
		return nil
	}
	return &TermExpiredError{Name: t.name, Token: t.token, Remaining: r, Min: min, Reason: t.Reason()}
}

// Done returns a channel that is closed, exactly once, when the term ends.
func (t *Term) Done() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.signals()
	if s.done == nil {
		s.done = make(chan struct{})
		if t.ended() {
			close(s.done)
		}
	}
	return s.done
}

// Reason returns why the term ended, or [ReasonNotEnded]. A term whose deadline
// passed reads ReasonNotEnded until the engine revokes it, which it does at the
// deadline; Valid is false already.
func (t *Term) Reason() Reason { return Reason(t.reason.Load()) }

// Context returns a context that is cancelled when the term ends, with the
// term's [Reason] as its cause. It carries no deadline: the term's end is not
// known in advance.
func (t *Term) Context() context.Context {
	// Made on demand: a lock's term is often never asked for one.
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.signals()
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
		if t.ended() {
			s.cancel(t.Reason())
		}
	}
	return s.ctx
}

// Sequencer returns the term's sequencer (§7, F7): its lease name and
// fencing token as one value, whose String form ("simba-seq/1 lease NAME
// TOKEN") travels with a write to a downstream service, which parses it
// with fencing.ParseSequencer and checks it with a fencing.Sequencers
// guard.
func (t *Term) Sequencer() backends.Sequencer {
	return backends.Sequencer{Name: t.name, Token: t.token}
}

// String returns "name#token".
func (t *Term) String() string { return t.name + "#" + strconv.FormatInt(int64(t.token), 10) }

// end revokes the term: Valid becomes false, the context is cancelled with
// the reason, Done is closed. It reports whether this call ended it.
func (t *Term) end(r Reason) bool {
	if t.ended() {
		return false
	}
	t.reason.Store(int32(r))
	t.mu.Lock()
	// Valid turned false at the deadline if that passed first, else now.
	t.endedAt.Store(int64(max(min(t.deadline.now(), t.deadline.get()), 1)))
	if s := t.sig; s != nil {
		if s.cancel != nil {
			s.cancel(r)
		}
		if s.done != nil {
			close(s.done)
		}
	}
	t.mu.Unlock()
	return true
}
