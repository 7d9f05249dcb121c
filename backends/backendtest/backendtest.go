package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// Harness describes the backend under test to [Run]. New and TTL are
// required; every hook is optional, and the cases that need a missing hook are
// skipped with a message naming it — or fail, under [RequireEnv], unless
// Skip lists them.
type Harness struct {
	// New returns a fresh Backend, isolated from every other Backend it
	// returned: no sessions, leases, values or groups in common (memory: a
	// new store; Redis: a new key prefix; PostgreSQL: a new schema;
	// ZooKeeper: a new chroot). It is called once per case, from the case's
	// goroutine, possibly in parallel with other cases; it releases what it
	// made with t.Cleanup and fails the test with t.Fatal if it cannot.
	New func(t *testing.T) backends.Backend

	// TTL is the session time to live the cases ask for, and the unit of
	// every wait: cases that wait for an expiry take about 2×TTL. Use 1–3 s
	// against a real server, less against an in-process store.
	TTL time.Duration

	// MaxLease is the longest time to live the backend grants, if it clamps
	// requests (C2, §15), or 0 if it does not.
	MaxLease time.Duration

	// ExpiryGrace is how long after a session's remaining time has run out
	// the store may take to treat it as expired, plus the slack the cases
	// allow for calls and notifications to arrive. ZooKeeper notices expiry
	// on its tick; Redis and PostgreSQL at once. Zero means max(TTL/2,
	// 100ms).
	ExpiryGrace time.Duration

	// ExpireSession, if set, expires the session id in the store at once,
	// behind its client's back, and returns once the store has done so.
	ExpireSession func(t *testing.T, b backends.Backend, id backends.SessionID)

	// NewRestartable, if set, returns a fresh Backend, as New does, on a
	// store of its own (a private server the case may restart), and a
	// function that restarts that store with all of its state lost
	// (sessions, leases, values, groups, token counter) and returns the
	// MaxLease the backend was configured with, which its amnesia guard
	// waits for before granting leases again (§15). Keep that MaxLease
	// short (a few TTLs) so that the case stays short.
	NewRestartable func(t *testing.T) (b backends.Backend, restart func() (maxLease time.Duration))

	// NewDurable, if set, returns a fresh Backend, as New does, on a store
	// of its own that keeps its state across restarts (PostgreSQL,
	// ZooKeeper, Redis with an append-only file), and a function that
	// restarts that store and returns once it is restarting (it may not
	// answer yet). Keep the restart well within TTL, so that sessions
	// survive it.
	NewDurable func(t *testing.T) (b backends.Backend, restart func())

	// DurableTTL, if set, is the session time to live the durable restart
	// asks for instead of TTL, for a store that takes longer than TTL to
	// restart (ZooKeeper's JVM on a loaded machine takes seconds). The
	// backend NewDurable returns must grant it.
	DurableTTL time.Duration

	// RestartEndsSessions says that a restart of the store, even one that
	// keeps its data, ends every session and starts the amnesia guard
	// (§15): Redis's guard cannot tell a restart that kept everything from
	// one that lost writes, since it compares run ids. The durable restart
	// then checks that the store kept its values and tokens instead of its
	// sessions.
	RestartEndsSessions bool

	// NewCuttable, if set, returns a fresh Backend, as New does, and a
	// function that makes the store unreachable from it (refused
	// connections or dropped packets, for example through a proxy) and
	// returns a function that heals it.
	NewCuttable func(t *testing.T) (b backends.Backend, cut func() (heal func()))

	// Skip lists the cases this harness does not run, each with the reason
	// (a store without an ability the case needs, for example). They are
	// skipped with that reason; under [RequireEnv] every other case must
	// run.
	Skip map[string]string
}

// Run runs the conformance suite against the backend described by h, one
// subtest per contract, in parallel where they are independent.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is nil")
	}
	if h.TTL <= 0 {
		t.Fatalf("backendtest: Harness.TTL is %v; want > 0", h.TTL)
	}
	if h.MaxLease < 0 || h.ExpiryGrace < 0 {
		t.Fatalf("backendtest: Harness.MaxLease %v, ExpiryGrace %v; want ≥ 0", h.MaxLease, h.ExpiryGrace)
	}
	if h.ExpiryGrace == 0 {
		h.ExpiryGrace = max(h.TTL/2, 100*time.Millisecond)
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	checkSkips(t, h.Skip, names)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := h.Skip[c.name]; ok {
				t.Skip(why)
			}
			t.Parallel()
			c.run(t, &h)
		})
	}
}

// cases lists the contracts in the order they are run; each function's
// comment names the rules it checks.
var cases = []struct {
	name string
	run  func(*testing.T, *Harness)
}{
	{"OpenSession", testOpenSession},
	{"TTLClamp", testTTLClamp},
	{"KeepAliveExtends", testKeepAliveExtends},
	{"UniqueSessionIDs", testUniqueSessionIDs},
	{"ExpiredSessionNeverRevives", testExpiredSessionNeverRevives},
	{"ExpireSessionBehindBack", testExpireSessionBehindBack},
	{"KeepAliveRacesTakeover", testKeepAliveRacesTakeover},
	{"CloseReleasesEverything", testCloseReleasesEverything},
	{"TokensIncrease", testTokensIncrease},
	{"TermOrder", testTermOrder},
	{"AcquireIdempotent", testAcquireIdempotent},
	{"AcquireHeld", testAcquireHeld},
	{"ConcurrentAcquire", testConcurrentAcquire},
	{"ReleaseNeedsHolderAndToken", testReleaseNeedsHolderAndToken},
	{"Batch", testBatch},
	{"BatchClosedSession", testBatchClosedSession},
	{"Digest", testDigest},
	{"DigestInReplies", testDigestInReplies},
	{"Holder", testHolder},
	{"HolderChanges", testHolderChanges},
	{"InvalidSessionOptions", testInvalidSessionOptions},
	{"Values", testValues},
	{"ValueSize", testValueSize},
	{"GroupMembers", testGroupMembers},
	{"GroupEpoch", testGroupEpoch},
	{"GroupMismatch", testGroupMismatch},
	{"MembershipDiesWithSession", testMembershipDiesWithSession},
	{"InvalidNames", testInvalidNames},
	{"Notify", testNotify},
	{"NotifyMembers", testNotifyMembers},
	{"StoreClock", testStoreClock},
	{"Inspect", testInspect},
	{"EndedContext", testEndedContext},
	{"BackendClosed", testBackendClosed},
	{"AmnesiaGuard", testAmnesiaGuard},
	{"DurableRestart", testDurableRestart},
	{"Unreachable", testUnreachable},
}

// env is one case's backend and context.
type env struct {
	t      *testing.T
	h      *Harness
	b      backends.Backend
	ctx    context.Context
	opened int // sessions opened by open, numbering their identities
}

func newEnv(t *testing.T, h *Harness) *env {
	t.Helper()
	return envOn(t, h, h.New(t))
}

// envOn is newEnv on a backend made by one of the harness's constructors.
func envOn(t *testing.T, h *Harness, b backends.Backend) *env {
	t.Helper()
	if b == nil {
		t.Fatal("the harness returned a nil Backend")
	}
	// Bound the whole case, so a backend that hangs fails it instead of
	// the whole test binary.
	limit := 20*h.TTL + 4*h.MaxLease + 30*time.Second
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	t.Cleanup(cancel)
	return &env{t: t, h: h, b: b, ctx: ctx}
}

// open opens a session with the harness TTL, closed when the case ends.
func (e *env) open() (backends.Session, backends.Renewal) {
	e.t.Helper()
	return e.openTTL(e.h.TTL)
}

func (e *env) openTTL(ttl time.Duration) (backends.Session, backends.Renewal) {
	e.t.Helper()
	e.opened++
	return e.openAs(backends.SessionOptions{TTL: ttl, Identity: fmt.Sprintf("backendtest node %d", e.opened)})
}

// openAs opens a session with opts, closed when the case ends.
func (e *env) openAs(opts backends.SessionOptions) (backends.Session, backends.Renewal) {
	e.t.Helper()
	s, r, err := e.b.OpenSession(e.ctx, opts)
	if err != nil {
		e.t.Fatalf("OpenSession(%+v): %v", opts, err)
	}
	if s == nil {
		e.t.Fatalf("OpenSession(%+v) returned a nil Session and no error", opts)
	}
	e.t.Cleanup(func() {
		// t.Context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second+e.h.TTL)
		defer cancel()
		if err := s.Close(ctx); err != nil && !errors.Is(err, backends.ErrSessionExpired) {
			e.t.Logf("closing session %s: %v", s.ID(), err)
		}
	})
	return s, r
}

func (e *env) keepAlive(s backends.Session) backends.Renewal {
	e.t.Helper()
	r, err := s.KeepAlive(e.ctx)
	if err != nil {
		e.t.Fatalf("KeepAlive of session %s: %v", s.ID(), err)
	}
	return r
}

func (e *env) acquire(s backends.Session, name string) backends.Grant {
	e.t.Helper()
	g, err := s.Acquire(e.ctx, name)
	if err != nil {
		e.t.Fatalf("Acquire(%q) by session %s: %v", name, s.ID(), err)
	}
	if g.Token <= 0 {
		e.t.Fatalf("Acquire(%q) by session %s: token %d; want > 0 (T2)", name, s.ID(), g.Token)
	}
	return g
}

func (e *env) release(s backends.Session, name string, tok backends.Token) backends.Digest {
	e.t.Helper()
	d, err := s.Release(e.ctx, name, tok)
	if err != nil {
		e.t.Fatalf("Release(%q, %d) by session %s: %v", name, tok, s.ID(), err)
	}
	return d
}

func (e *env) owned(s backends.Session) ([]backends.Held, backends.Digest) {
	e.t.Helper()
	held, d, err := s.Owned(e.ctx)
	if err != nil {
		e.t.Fatalf("Owned of session %s: %v", s.ID(), err)
	}
	return held, d
}

func (e *env) join(s backends.Session, group string, partitions int) {
	e.t.Helper()
	if err := s.Join(e.ctx, group, partitions); err != nil {
		e.t.Fatalf("Join(%q, %d) by session %s: %v", group, partitions, s.ID(), err)
	}
}

func (e *env) members(s backends.Session, group string) backends.GroupView {
	e.t.Helper()
	v, err := s.Members(e.ctx, group)
	if err != nil {
		e.t.Fatalf("Members(%q) by session %s: %v", group, s.ID(), err)
	}
	if len(v.Holders) != v.Partitions {
		e.t.Fatalf("Members(%q): %d holders for %d partitions; want one per partition", group, len(v.Holders), v.Partitions)
	}
	if !slices.IsSorted(v.Members) {
		e.t.Errorf("Members(%q).Members = %v; want them sorted", group, v.Members)
	}
	return v
}

// holds reports whether s holds name with token tok, according to Owned.
func (e *env) holds(s backends.Session, name string, tok backends.Token) bool {
	e.t.Helper()
	held, _ := e.owned(s)
	return slices.Contains(held, backends.Held{Name: name, Token: tok})
}

// wantHeldBy fails the case unless name is held by holder with token tok:
// holder's Owned lists it, and another session cannot acquire it.
func (e *env) wantHeldBy(holder, other backends.Session, name string, tok backends.Token) {
	e.t.Helper()
	if !e.holds(holder, name, tok) {
		held, _ := e.owned(holder)
		e.t.Errorf("session %s owns %v; want it to hold %q with token %d", holder.ID(), held, name, tok)
	}
	if _, err := other.Acquire(e.ctx, name); !errors.Is(err, backends.ErrLeaseHeld) {
		e.t.Errorf("Acquire(%q) by session %s while %s holds it = %v; want ErrLeaseHeld", name, other.ID(), holder.ID(), err)
	}
}

// poll is the interval of the cases' polling loops.
func (e *env) poll() time.Duration {
	return min(max(e.h.TTL/10, 5*time.Millisecond), 100*time.Millisecond)
}

// sleep waits for d while keeping the sessions alive (every TTL/4).
func (e *env) sleep(d time.Duration, keep ...backends.Session) {
	e.t.Helper()
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		select {
		case <-time.After(min(left, e.h.TTL/4)):
		case <-e.ctx.Done():
			e.t.Fatalf("case timed out: %v", e.ctx.Err())
		}
		for _, s := range keep {
			e.keepAlive(s)
		}
	}
}

// eventually calls try every poll interval, keeping the sessions in keep
// alive, until it returns true or within has passed; it reports whether try
// succeeded.
func (e *env) eventually(within time.Duration, try func() bool, keep ...backends.Session) bool {
	e.t.Helper()
	end := time.Now().Add(within)
	for {
		if try() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		e.sleep(e.poll(), keep...)
	}
}

// waitExpired waits until the store must have expired a session whose last
// renewal, sent at sentAt, granted r.Remaining, keeping the sessions in keep
// alive.
func (e *env) waitExpired(sentAt time.Time, r backends.Renewal, keep ...backends.Session) {
	e.t.Helper()
	e.sleep(time.Until(sentAt.Add(r.Remaining+e.h.ExpiryGrace)), keep...)
}

// wantErr fails the case unless err wraps target.
func wantErr(t *testing.T, err, target error, format string, args ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf(format+" = %v; want an error wrapping %q", append(args, err, target)...)
	}
}

// concurrently runs fn(i) for i in [0, n) on n goroutines that start
// together, and waits for them.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}
