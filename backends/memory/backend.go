package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/check"
	"github.com/simba-go/simba/backends/internal/watch"
)

// args checks the arguments of the store's operations.
var args = check.For("memory")

// DefaultMaxLease is the longest session time to live a [Store] grants unless
// [WithMaxLease] says otherwise. It is also the store's lock-delay after a
// restart (the amnesia guard).
const DefaultMaxLease = 60 * time.Second

// Store is an in-process store of sessions, leases, values and groups. It
// implements [backends.Backend] and [backends.StoreClock]; the sessions it
// opens implement [backends.Session] and [backends.Notifier]. It is safe for
// concurrent use. The zero Store is not usable; call [New] or [Open].
type Store struct {
	maxLease time.Duration
	faults   Faults

	mu sync.Mutex

	// The store clock: baseWall (Unix nanoseconds) at the monotonic instant
	// baseMono, advancing at rate store seconds per real second.
	baseWall int64
	baseMono time.Time
	rate     float64

	// State lost at a restart.
	runID      string
	guardUntil int64 // store nanoseconds; no acquisition before (amnesia guard)
	lastToken  int64
	rev        uint64 // store-wide revision for group epochs
	sessions   map[backends.SessionID]*sessionRec
	expiries   expiryHeap
	leases     map[string]*leaseRec
	values     map[string][]byte
	groups     map[string]*groupRec

	// Watchers are the clients' subscriptions, not store state: they survive
	// a restart (and are woken by it).
	watches watch.Registry

	// pending holds the releases whose watches to wake once mu is
	// released; pendingAll, that every watch is to be woken.
	pending    []release
	pendingAll bool

	// holders are the changes of holder that HolderNotifier watches are
	// told, in the order the store made them (guarded by mu), delivered
	// once mu is released by whichever call holds fireMu, so that two calls
	// never deliver them out of order (see holders.go).
	holders holderFeed
}

// Option configures a [Store] built by [New].
type Option func(*Store)

// WithMaxLease sets the longest session time to live the store grants:
// [backends.Backend.OpenSession] clamps longer requests to it (C2). It is
// also the store's lock-delay after a restart: no lease is granted until d has
// passed on the store clock since the restart (§15). It panics unless
// d > 0. The default is [DefaultMaxLease].
func WithMaxLease(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("memory: WithMaxLease(%v): want a duration > 0", d))
	}
	return func(s *Store) { s.maxLease = d }
}

// WithClockRate sets the rate of the store clock: rate store seconds pass per
// second of the Go clock, so that a test can simulate a store whose clock runs
// faster (rate > 1) or slower (rate < 1) than the client's (D3). Expiry is
// measured on the store clock. It panics unless rate is finite and > 0. The
// default is 1; [Faults.SetClockRate] changes it later.
func WithClockRate(rate float64) Option {
	checkRate("WithClockRate", rate)
	return func(s *Store) { s.rate = rate }
}

func checkRate(fn string, rate float64) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		panic(fmt.Sprintf("memory: %s(%v): want a finite rate > 0", fn, rate))
	}
}

// New returns a new, empty store.
func New(opts ...Option) *Store {
	now := time.Now()
	s := &Store{
		maxLease: DefaultMaxLease,
		baseWall: now.UnixNano(),
		baseMono: now,
		rate:     1,
	}
	s.faults.s = s
	for _, opt := range opts {
		opt(s)
	}
	s.reset()
	return s
}

var named struct {
	mu     sync.Mutex
	stores map[string]*Store
}

// Open returns the process-wide store called name, creating it with default
// options on first use: the same name always gives the same store, and "" is
// the default store. It backs the "memory:" and "memory:NAME" backend URLs.
func Open(name string) *Store {
	named.mu.Lock()
	defer named.mu.Unlock()
	if s, ok := named.stores[name]; ok {
		return s
	}
	if named.stores == nil {
		named.stores = make(map[string]*Store)
	}
	s := New()
	named.stores[name] = s
	return s
}

// MaxLease returns the longest session time to live the store grants, which
// is also its lock-delay after a restart.
func (s *Store) MaxLease() time.Duration { return s.maxLease }

// RunID identifies the store's current run. It changes when the store
// restarts and loses its state ([Faults.Restart]), so that a client can tell a
// restarted store from one that kept its state (§15).
func (s *Store) RunID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runID
}

// Faults returns the store's fault controls and call counters, a test-support
// surface not meant for production use.
func (s *Store) Faults() *Faults { return &s.faults }

// reset drops all state, as a restart of the store's process would. Called
// with mu held (or before the store is shared).
func (s *Store) reset() {
	s.runID = randomHex(8)
	s.lastToken = 0
	s.rev = 0
	s.sessions = make(map[backends.SessionID]*sessionRec)
	s.expiries = nil
	s.leases = make(map[string]*leaseRec)
	s.values = make(map[string][]byte)
	s.groups = make(map[string]*groupRec)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// now returns the store clock in Unix nanoseconds. Called with mu held.
func (s *Store) now() int64 {
	elapsed := time.Since(s.baseMono)
	if s.rate == 1 {
		return s.baseWall + int64(elapsed)
	}
	return s.baseWall + int64(float64(elapsed)*s.rate)
}

// setRate changes the clock rate from now on, without a jump. Called with mu
// held.
func (s *Store) setRate(rate float64) {
	s.baseWall = s.now()
	s.baseMono = time.Now()
	s.rate = rate
}

func storeTime(nanos int64) time.Time { return time.Unix(0, nanos).UTC() }

// nextToken returns a token greater than every token this run of the store
// issued and, since it is at least the store clock in microseconds, greater
// than every token an earlier run issued before its restart: the restart
// guard keeps acquisitions out for MaxLease afterwards, so the clock has moved
// well past them (F5, §15). Called with mu held.
func (s *Store) nextToken(now int64) backends.Token {
	t := max(s.lastToken+1, now/int64(time.Microsecond))
	s.lastToken = t
	return backends.Token(t)
}

// nextRev returns a new store-wide revision, used for group epochs. Called
// with mu held.
func (s *Store) nextRev() uint64 {
	s.rev++
	return s.rev
}

// lock takes mu and reaps the sessions that expired by the store clock.
// It returns the store clock.
func (s *Store) lock() int64 {
	s.mu.Lock()
	now := s.now()
	for len(s.expiries) > 0 && s.expiries[0].expiry <= now {
		s.endSession(s.expiries[0])
	}
	return now
}

// unlock releases mu and then wakes the watches the operation touched, so a
// watcher's function never runs under the store's mutex.
func (s *Store) unlock() {
	pending, all := s.pending, s.pendingAll
	s.pending, s.pendingAll = nil, false
	changed := len(s.holders.queue) > 0
	s.mu.Unlock()
	if changed {
		s.deliverHolders()
	}
	if all {
		s.watches.FireAll()
		return
	}
	for _, r := range pending {
		s.watches.FireFrom(string(r.from), r.name)
	}
}

// release is a lease name freed, and the session that held it: its own
// watches are not woken (a session's release tells it nothing new).
type release struct {
	from backends.SessionID
	name string
}

// call runs op as one round trip to the store: it counts the call, applies the
// faults (unreachable, request latency), runs op under the store's mutex
// (after reaping the sessions that expired, except for Inspect, which
// changes nothing), then applies the reply latency. A call whose context ends while it waits returns
// an error wrapping the context's error (and ErrUnavailable if the request
// never reached the store).
func (s *Store) call(ctx context.Context, m method, op func(now int64) error) error {
	f := &s.faults
	f.calls[m].Add(1)
	req, reply, mode := f.get()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %s: %w: %w", m, backends.ErrUnavailable, err)
	}
	switch mode {
	case Refuse:
		return fmt.Errorf("memory: %s: store unreachable (refused): %w", m, backends.ErrUnavailable)
	case Blackhole:
		<-ctx.Done()
		return fmt.Errorf("memory: %s: store unreachable (no reply): %w: %w", m, backends.ErrUnavailable, ctx.Err())
	}
	if err := sleep(ctx, req); err != nil {
		return fmt.Errorf("memory: %s: request not delivered: %w: %w", m, backends.ErrUnavailable, err)
	}
	var now int64
	if m == mInspect {
		s.mu.Lock() // a listing reaps nothing: it changes no state
		now = s.now()
	} else {
		now = s.lock()
	}
	err := op(now)
	s.unlock()
	if serr := sleep(ctx, reply); serr != nil {
		// The store handled the call; only its reply is lost.
		return fmt.Errorf("memory: %s: reply not received: %w: %w", m, backends.ErrUnavailable, serr)
	}
	return err
}

// sleep waits for d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StoreTime returns the store clock, read in one call.
func (s *Store) StoreTime(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.call(ctx, mStoreTime, func(now int64) error {
		t = storeTime(now)
		return nil
	})
	return t, err
}
