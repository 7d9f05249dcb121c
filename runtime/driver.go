package runtime

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// The driver hands the engine's core (runtime/internal/engine) its inputs,
// each with the time on the client's monotonic clock, and performs the
// effects the core asks for — backend calls, terms, callbacks, tasks,
// events — on real goroutines and one timer. The core decides; the driver
// never does. It is etcd raft's node to the core's raft: a [Client] holds
// one and never touches the core itself.
//
// Its files, from the API down: inputs.go (what the API steps and asks),
// locks.go (Lock callers that make their own calls), loop.go (apply, flush,
// perform, and the loop of timer ticks and release notifications),
// calls.go (backend calls), tasks.go (tasks, scheduled runs and callbacks),
// events.go (the event queue), and this file, its state.

// driver is one client's driver. Its state is guarded by mu, except what
// is set once by newDriver and what says otherwise.
type driver struct {
	backend  backends.Backend
	cfg      vocab.Config // the configuration the core runs with; read without mu
	identity string       // recorded with every session the driver opens
	logger   *slog.Logger
	observer Observer
	exec     func(func()) error
	epoch    time.Time // the zero of the client's monotonic clock (mono)

	mu sync.Mutex
	m  *engine.Machine // the engine's core; every call under mu
	registry
	timer    *time.Timer
	live     chan struct{} // closed while the session is live
	renewed  chan struct{} // closed at the next successful renewal
	shutdown bool
	quit     chan struct{} // closed when the machine has closed

	loopTurn  chan struct{} // the loop's turn, taken by one of its two goroutines (loop.go)
	loopCalls atomic.Int32  // acquires made by the goroutine that handed the loop over: 0 or 1

	notes         notes         // release notifications from the backend (own lock)
	holderWatches holderWatches // WatchHolder loops to wake (own lock)
	events        *serialQueue  // the events' dispatcher (own lock)
	dones         callbackDones // CallbackDone inputs to step in batches (own lock)
	wg            sync.WaitGroup
}

// registry is what the driver keeps for the ids the core names, all
// guarded by the driver's mutex.
type registry struct {
	sessions   map[uint64]backends.Session     // session generation → its handle
	watches    map[uint64]map[string]func()    // session generation → name → stop
	deadlines  map[uint64]*deadline            // session generation → its local deadline, read by Terms
	terms      map[engine.TermID]*Term         // the terms the core refers to
	contenders map[engine.ContenderID]*started // elections, locks and schedules started
	groupFns   map[engine.GroupID]PartitionFunc
	waiters    map[engine.Waiter]chan waitResult
	lockers    map[string]*locker             // names whose Lock caller waits and makes the name's acquires (see locker)
	successors map[engine.ContenderID]*handle // an election accepting a hand-over → its successor lease's (handover.go)
	requests   map[engine.ContenderID]func()  // an election accepting hand-over requests → what stops following them (handoverrequest.go)
	lastID     uint64                         // the last contender, group or waiter id handed out
	sentAt     mono                           // the time of the input being applied: when its requests are sent
	inl        inline                         // the API caller being applied, if it makes its own calls
	freeWaits  []chan waitResult              // waiters' channels received from, for reuse
	leaseCalls int                            // lease calls on goroutines of their own (see maxLeaseCalls)
	queued     []pendingCall                  // lease calls waiting for one of those goroutines, oldest first
	kicks      []*serialQueue                 // callback queues filled under the mutex, to start once it is released
	recovering guard                          // the store's amnesia guard, as the last refused acquire reported it
}

// started is the driver's half of an election, lock or schedule: what the
// core names by ContenderID but must not hold.
//
// Only contenders with a listener or a task have one: a client holding a
// million leases through elections without either, or through locks, keeps
// no driver state per lease but its Terms.
type started struct {
	listener Listener     // nil if none
	task     TaskFunc     // the task, or a schedule's run; nil if none
	queue    *serialQueue // the listener's dispatcher
}

// pendingCall is a backend request the core sent, with what performing it
// needs.
type pendingCall struct {
	req      engine.Request
	s        backends.Session // nil for an open or a store-clock read
	deadline time.Time        // when the request was sent, or taken from the queue, plus its timeout (D2)
}

// inline is what the driver keeps for the API caller whose input is being
// applied (guarded by mu), or for the loop's goroutine stepping a release
// notification (onNote): the calls it makes itself (see applySync).
type inline struct {
	active bool
	name   string    // the lease whose acquires and releases it makes
	until  time.Time // the caller's deadline; zero if its context never ends
	calls  []pendingCall
}

// A locker is a Lock caller waiting for its lease: it makes the name's
// acquires itself, as Lock's first attempt does, and it is woken by the
// name's release notifications directly, not through the driver's loop. A
// graceful hand-off to a waiting Lock thus wakes one goroutine — the
// waiter's, which steps the notification, makes the acquire and returns
// with the term — where it woke three (the loop, a call's goroutine, the
// waiter). Only the first Lock of a name on a client waits so, and only
// with a context that cannot end before a call's deadline without a
// deadline of its own (as for Lock's first attempt). See waitLock.
type locker struct {
	name  string
	until time.Time        // the caller's deadline; zero if its context never ends
	calls chan pendingCall // acquires of name handed to the caller
	wake  chan struct{}    // release notifications of name
}

// callbackDones collects the core's CallbackDone inputs from the goroutines
// whose callbacks ran, so that many callbacks ending together — a bulk
// Close's revoked callbacks, one per lease — step the core in batches under
// one lock, not one lock and one flush each. The first goroutine to find no
// batch in progress steps the batch, and the next ones while it does (see
// callbackDone).
type callbackDones struct {
	mu   sync.Mutex
	ids  []engine.ContenderID
	busy bool
}

// waitResult is what a waiter's channel receives: the Complete effect's
// term and error.
type waitResult struct {
	term *Term
	err  error
}

func newRegistry() registry {
	return registry{
		sessions:   make(map[uint64]backends.Session),
		watches:    make(map[uint64]map[string]func()),
		deadlines:  make(map[uint64]*deadline),
		terms:      make(map[engine.TermID]*Term),
		contenders: make(map[engine.ContenderID]*started),
		groupFns:   make(map[engine.GroupID]PartitionFunc),
		waiters:    make(map[engine.Waiter]chan waitResult),
		lockers:    make(map[string]*locker),
		successors: make(map[engine.ContenderID]*handle),
		requests:   make(map[engine.ContenderID]func()),
		freeWaits:  make([]chan waitResult, 0, 4),
	}
}

// newID returns a fresh id for a contender, a group or a waiter. The
// caller holds the driver's mutex.
func (r *registry) newID() uint64 {
	r.lastID++
	return r.lastID
}

// newWaiter returns a waiter and the channel its Complete effect is sent
// on. The caller holds the driver's mutex.
func (r *registry) newWaiter() (engine.Waiter, chan waitResult) {
	w := engine.Waiter(r.newID())
	var ch chan waitResult
	if n := len(r.freeWaits); n > 0 {
		ch = r.freeWaits[n-1]
		r.freeWaits = r.freeWaits[:n-1]
	} else {
		ch = make(chan waitResult, 1)
	}
	r.waiters[w] = ch
	return w, ch
}

// now returns the client's monotonic clock (see mono).
func (d *driver) now() mono { return time.Since(d.epoch) }

// waitReuse waits for a waiter's channel that nothing else holds, or for
// ctx: once its one result has been received, the channel is kept for the
// next waiter (a channel of a pointer type costs two allocations).
func (d *driver) waitReuse(ctx context.Context, w chan waitResult) (waitResult, error) {
	select {
	case r := <-w:
		d.reuseWaiter(w)
		return r, r.err
	case <-ctx.Done():
		return waitResult{}, ctx.Err()
	}
}

// reuseWaiter keeps w, received from, for a later waiter.
func (d *driver) reuseWaiter(w chan waitResult) {
	d.mu.Lock()
	if len(d.freeWaits) < cap(d.freeWaits) {
		d.freeWaits = append(d.freeWaits, w)
	}
	d.mu.Unlock()
}
