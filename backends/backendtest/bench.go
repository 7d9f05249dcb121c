package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// BenchHarness describes the backend under test to the shared benchmarks
// ([BenchmarkAcquireRelease], [BenchmarkKeepAlive], [BenchmarkHandOff],
// [BenchmarkHeldLeases]). New
// is required; the rest is optional.
type BenchHarness struct {
	// New returns a backend on a fresh namespace, ready to grant, whose
	// MaxLease is at least maxLease (0: the harness's choice), and the
	// counters of the work it makes the store do. It releases what it made
	// with b.Cleanup.
	New func(b *testing.B, maxLease time.Duration) (backends.Backend, []Counter)

	// Same returns another backend on the store and namespace of bk:
	// another node. If nil, the hand-offs' two nodes share bk.
	Same func(b *testing.B, bk backends.Backend) backends.Backend

	// InProcess says that a call takes about a microsecond (the memory
	// store): calls are not timed one by one, since the clock reads would
	// weigh in ns/op, so no p50 is reported.
	InProcess bool

	// KeepAliveLeases are the numbers of leases the keep-alive benchmark
	// holds, one sub-benchmark each; nil means 1, 100 and 10,000.
	KeepAliveLeases []int

	// KeepAliveJoins says that the keep-alive benchmark's session also
	// joins a group of four partitions, so that its keep-alives report a
	// group counter too (the memory store's benchmark has always measured
	// that; the others measure leases alone).
	KeepAliveJoins bool

	// AcquireReleaseFloor, if set, returns the store's raw counterpart of an
	// acquire and a release on bk's store (two single-row conditional
	// UPDATEs, two EVALSHA of a trivial script, a Create and a Delete),
	// timed beside each of them.
	AcquireReleaseFloor func(b *testing.B, bk backends.Backend) Floor

	// HandOffFloor, if set, returns the store's raw counterpart of a
	// hand-off on bk's store, timed after the same idle as each backend
	// hand-off.
	HandOffFloor func(b *testing.B, bk backends.Backend) Floor

	// HandOffIdle is how long the nodes of the backend hand-off idle before
	// each step, as a candidate does between attempts; 0 means 200 ms.
	HandOffIdle time.Duration

	// MaxHeldLeases, if above 0, caps the leases [BenchmarkHeldLeases]
	// holds, whatever SIMBA_BENCH_LEASES asks (ZooKeeper: 100,000, the
	// issue's target there, since each lease is a node the ensemble keeps
	// in memory and writes to its log).
	MaxHeldLeases int
}

// Counter is a running count of work the store did, read before and after
// the operations a benchmark measures and reported per operation under
// Unit + "/op" (statements, EVALSHA calls, requests written, µs of server
// time).
type Counter struct {
	Unit string
	Read func() float64
	// PerKeepAlive, if above 0, is the exact count every keep-alive must
	// make (S1: one call, whatever the leases held); the keep-alive
	// benchmark fails otherwise.
	PerKeepAlive float64
}

// Floor makes one raw counterpart of a benchmark's operation, in iteration
// i, and returns its kind, which names its figure (kind + "-p50-µs"): a
// floor may alternate kinds by round.
type Floor func(i int) (kind string)

// benchSession opens a session on bk for a benchmark, closed when it ends;
// renew keeps it alive, renewing whenever a third of what the store granted
// has passed (call it between timed operations). In process, it reads the
// clock once in 64 calls, so as not to weigh in ns/op.
func benchSession(b *testing.B, bk backends.Backend, inProcess bool) (s backends.Session, renew func()) {
	b.Helper()
	ctx := context.Background()
	s, r, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute, Identity: "backendtest bench"})
	if err != nil {
		b.Fatalf("OpenSession: %v", err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	every, renewed, calls, skip := r.Remaining/3, time.Now(), 0, 1
	if inProcess {
		skip = 64
	}
	return s, func() {
		if calls++; calls%skip != 0 || time.Since(renewed) < every {
			return
		}
		r, err := s.KeepAlive(ctx)
		if err != nil {
			b.Fatalf("KeepAlive: %v", err)
		}
		every, renewed = r.Remaining/3, time.Now()
	}
}

// BenchmarkAcquireRelease measures one acquire and one release of a free
// lease by one session: two round trips (§12, B6). Reported: ns/op and
// allocations; unless InProcess, the median pair (acq+rel-p50-µs) and, with
// a floor timed beside each pair, the floor's median (kind-p50-µs) and the
// ratio of the two; the counters per pair (unit/op) and per floor
// (floor-unit/op, where the floor counts at all), each the median of 15
// interleaved blocks of 100 after the timed loop (on a shared machine the
// load comes in bursts).
func BenchmarkAcquireRelease(b *testing.B, h BenchHarness) {
	bk, counters := h.New(b, 0)
	s, renew := benchSession(b, bk, h.InProcess)
	ctx := context.Background()
	var floor Floor
	if h.AcquireReleaseFloor != nil {
		floor = h.AcquireReleaseFloor(b, bk)
	}
	ours := func() {
		g, err := s.Acquire(ctx, "lease")
		if err != nil {
			b.Fatalf("Acquire: %v", err)
		}
		if _, err := s.Release(ctx, "lease", g.Token); err != nil {
			b.Fatalf("Release: %v", err)
		}
	}
	var (
		pairs  []time.Duration
		floors = map[string][]time.Duration{}
		kinds  []string
	)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		renew()
		if h.InProcess && floor == nil {
			ours()
			continue
		}
		t0 := time.Now()
		ours()
		t1 := time.Now()
		pairs = append(pairs, t1.Sub(t0))
		if floor != nil {
			kind := floor(i)
			if _, ok := floors[kind]; !ok {
				kinds = append(kinds, kind)
			}
			floors[kind] = append(floors[kind], time.Since(t1))
		}
		i++
	}
	if len(pairs) > 0 {
		reportMicros(b, pairs, 0.5, "acq+rel-p50-µs")
	}
	for _, k := range kinds {
		reportMicros(b, floors[k], 0.5, k+"-p50-µs")
	}
	if len(kinds) > 0 {
		b.ReportMetric(float64(quantile(pairs, 0.5))/float64(quantile(floors[kinds[0]], 0.5)), "ratio")
	}
	if len(counters) == 0 {
		return
	}
	const blocks, perBlock = 15, 100
	block := func(f func()) []float64 {
		renew()
		before := readCounters(counters)
		for range perBlock {
			f()
		}
		after := readCounters(counters)
		per := make([]float64, len(counters))
		for j := range counters {
			per[j] = (after[j] - before[j]) / perBlock
		}
		return per
	}
	oursPer, floorPer := make([][]float64, len(counters)), make([][]float64, len(counters))
	for range blocks {
		for j, v := range block(ours) {
			oursPer[j] = append(oursPer[j], v)
		}
		if floor != nil {
			n := 0
			for j, v := range block(func() { floor(n); n++ }) {
				floorPer[j] = append(floorPer[j], v)
			}
		}
	}
	for j, c := range counters {
		b.ReportMetric(medianOf(oursPer[j]), c.Unit+"/op")
		// A floor made on a connection of its own counts nothing here.
		if floor != nil && slices.Max(floorPer[j]) > 0 {
			b.ReportMetric(medianOf(floorPer[j]), "floor-"+c.Unit+"/op")
		}
	}
}

// BenchmarkKeepAlive measures a keep-alive of a session holding 1, 100 and
// 10,000 leases (KeepAliveLeases), and a group's membership if KeepAliveJoins,
// one sub-benchmark each: one call whose cost does not grow with what the
// session holds (S1). Reported: ns/op; the
// median keep-alive (p50-µs) unless InProcess; each counter per keep-alive
// (unit/op), which must be exact where the counter says so.
func BenchmarkKeepAlive(b *testing.B, h BenchHarness) {
	bk, counters := h.New(b, 0)
	sizes := h.KeepAliveLeases
	if sizes == nil {
		sizes = []int{1, 100, 10_000}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, renew := benchSession(b, bk, h.InProcess)
			for i := range n {
				if _, err := s.Acquire(ctx, "lease-"+strconv.Itoa(i)); err != nil {
					b.Fatalf("Acquire of lease %d: %v", i, err)
				}
				renew()
			}
			if h.KeepAliveJoins {
				if err := s.Join(ctx, "group", 4); err != nil {
					b.Fatalf("Join: %v", err)
				}
			}
			if _, err := s.KeepAlive(ctx); err != nil { // warm: scripts loaded, statements prepared
				b.Fatal(err)
			}
			var times []time.Duration
			before := readCounters(counters)
			b.ReportAllocs()
			for b.Loop() {
				var t0 time.Time
				if !h.InProcess {
					t0 = time.Now()
				}
				r, err := s.KeepAlive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if !h.InProcess {
					times = append(times, time.Since(t0))
				}
				if r.Digest.Leases != n {
					b.Fatalf("the digest counts %d leases; want %d", r.Digest.Leases, n)
				}
			}
			after := readCounters(counters)
			for j, c := range counters {
				per := (after[j] - before[j]) / float64(b.N)
				if c.PerKeepAlive > 0 && per != c.PerKeepAlive {
					b.Fatalf("%d keep-alives counted %v %s; want exactly %v each (S1)", b.N, after[j]-before[j], c.Unit, c.PerKeepAlive)
				}
				b.ReportMetric(per, c.Unit+"/op")
			}
			if len(times) > 0 {
				reportMicros(b, times, 0.5, "p50-µs")
			}
		})
	}
}

// BenchmarkHandOff measures graceful hand-offs between two nodes, one
// sub-benchmark each way of looking:
//
//   - backend: at the backend level, without the engine. A waiter on a node
//     of its own was refused the lease and watches it (backends.Notifier);
//     after an idle span like a candidate's (HandOffIdle), the holder
//     releases, and the waiter acquires as soon as its watch fires; the two
//     swap roles. Beside each, after the same idle, the floor. Reported: the
//     medians of the hand-off, of its parts (the release's round trip, the
//     wait for the watch, the acquire's round trip) and of the floor's
//     kinds.
//   - engine: two runtime clients with the default timings, from Stop on
//     the leader to the elected callback on the other node; candidates
//     retry only every 2.5–5 s, so each hand-off is carried by the release
//     notification (A1, H1). Reported: median, p99, max.
//
// Each iteration is one hand-off, so -benchtime=200x measures exactly 200.
func BenchmarkHandOff(b *testing.B, h BenchHarness) {
	b.Run("backend", func(b *testing.B) { benchHandOffBackend(b, h) })
	b.Run("engine", func(b *testing.B) { benchHandOffEngine(b, h) })
	b.Run("group", func(b *testing.B) { benchHandOffGroup(b, h) })
}

func (h *BenchHarness) same(b *testing.B, bk backends.Backend) backends.Backend {
	if h.Same == nil {
		return bk
	}
	return h.Same(b, bk)
}

func benchHandOffBackend(b *testing.B, h BenchHarness) {
	idle := h.HandOffIdle
	if idle == 0 {
		idle = 200 * time.Millisecond // the compare tool's is 150–250 ms
	}
	bk, _ := h.New(b, 0)
	ctx := context.Background()
	holder, renewHolder := benchSession(b, bk, h.InProcess)
	waiter, renewWaiter := benchSession(b, h.same(b, bk), h.InProcess)
	woke := make(chan struct{}, 1)
	for _, s := range []backends.Session{holder, waiter} { // each waits in turn
		n, ok := s.(backends.Notifier)
		if !ok {
			b.Skipf("sessions (%T) do not implement backends.Notifier", s)
		}
		b.Cleanup(n.Watch("lease", func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		}))
	}
	g, err := holder.Acquire(ctx, "lease")
	if err != nil {
		b.Fatal(err)
	}
	var floor Floor
	if h.HandOffFloor != nil {
		floor = h.HandOffFloor(b, bk)
	}
	// handOff hands the lease from holder to waiter and swaps them; it
	// reports whether the waiter's watch fired within wait.
	handOff := func(wait time.Duration) (release, wake, acquire time.Duration, woken bool) {
		if _, err := waiter.Acquire(ctx, "lease"); !errors.Is(err, backends.ErrLeaseHeld) {
			b.Fatalf("the waiter's Acquire = %v; want ErrLeaseHeld", err)
		}
		select {
		case <-woke:
		default:
		}
		time.Sleep(idle)
		t0 := time.Now()
		if _, err := holder.Release(ctx, "lease", g.Token); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		select {
		case <-woke:
			woken = true
		case <-time.After(wait):
		}
		t2 := time.Now()
		if g, err = waiter.Acquire(ctx, "lease"); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		holder, waiter = waiter, holder
		renewHolder, renewWaiter = renewWaiter, renewHolder
		return t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), woken
	}
	// A watch may start late (a subscription, a LISTEN connection): warm up
	// until a hand-off each way was woken by its watch.
	for warm, tries := 0, 0; warm < 2; tries++ {
		if tries == 20 {
			b.Fatal("no two hand-offs in a row woken by the watch in 20 tries")
		}
		if _, _, _, woken := handOff(time.Second); woken {
			warm++
		} else {
			warm = 0
		}
	}
	var (
		handOffs, releases, wakes, acquires []time.Duration
		floors                              = map[string][]time.Duration{}
		kinds                               []string
	)
	i := 0
	for b.Loop() {
		renewHolder()
		renewWaiter()
		if floor != nil {
			time.Sleep(idle)
			t0 := time.Now()
			kind := floor(i)
			if _, ok := floors[kind]; !ok {
				kinds = append(kinds, kind)
			}
			floors[kind] = append(floors[kind], time.Since(t0))
		}
		r, w, a, woken := handOff(10 * time.Second)
		if !woken {
			b.Fatal("the waiter's watch did not fire within 10s of the release")
		}
		handOffs, releases, wakes, acquires = append(handOffs, r+w+a), append(releases, r), append(wakes, w), append(acquires, a)
		i++
	}
	reportMicros(b, handOffs, 0.5, "hand-off-p50-µs")
	for _, k := range kinds {
		reportMicros(b, floors[k], 0.5, k+"-p50-µs")
	}
	reportMicros(b, releases, 0.5, "release-p50-µs")
	reportMicros(b, wakes, 0.5, "wake-p50-µs")
	reportMicros(b, acquires, 0.5, "acquire-p50-µs")
}

// handOffNode is one client of the engine hand-off.
type handOffNode struct {
	c       *runtime.Client
	e       *runtime.Election
	elected chan time.Time
}

func (n *handOffNode) start(b *testing.B) {
	b.Helper()
	e, err := n.c.StartElection("bench", runtime.ListenerFuncs{
		OnElected: func(context.Context, *runtime.Term) { n.elected <- time.Now() },
	})
	if err != nil {
		b.Fatal(err)
	}
	n.e = e
}

func benchHandOffEngine(b *testing.B, h BenchHarness) {
	cfg := runtime.DefaultConfig()
	bk, _ := h.New(b, cfg.LeaseDuration)
	ctx := context.Background()
	var nodes [2]*handOffNode
	for i := range nodes {
		c, err := runtime.NewClient(h.same(b, bk), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(ctx) })
		nodes[i] = &handOffNode{c: c, elected: make(chan time.Time, 1)}
	}
	nodes[0].start(b)
	<-nodes[0].elected
	nodes[1].start(b)
	leader := 0
	var lat []time.Duration
	for b.Loop() {
		// Let the restarted candidate's first attempt (refused: the lease
		// is held) finish, so that every hand-off starts from the same
		// state: a candidate between attempts, woken only by the release
		// notification. A notification that arrives while an attempt is in
		// flight is not lost — the engine tries again as soon as the refused
		// attempt returns — but it costs a round trip more.
		time.Sleep(20 * time.Millisecond)
		other := 1 - leader
		// The guard's timer is set before the clock starts: setting it
		// between Stop and the wait woke the runtime's poller (a system
		// call) on the measured path.
		guard := time.NewTimer(10 * time.Second)
		t0 := time.Now()
		if err := nodes[leader].e.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-nodes[other].elected:
			lat = append(lat, at.Sub(t0))
		case <-guard.C:
			b.Fatalf("hand-off %d: the other node was not elected within 10s", len(lat))
		}
		guard.Stop()
		nodes[leader].start(b)
		leader = other
	}
	reportMicros(b, lat, 0.5, "p50-µs")
	reportMicros(b, lat, 0.99, "p99-µs")
	reportMicros(b, lat, 1, "max-µs")
}

// benchHandOffGroup measures the hand-over of a graceful leave: two
// runtime clients with the default timings are members of a group of one
// partition; from Stop on the member holding it to the partition's task
// starting on the other (§13: a graceful leave moves its partitions at
// once, woken by their release, as a plain lease is taken — compare with
// the engine sub-benchmark's median). The stopped member then joins again,
// untimed, and holds nothing until the next leave.
func benchHandOffGroup(b *testing.B, h BenchHarness) {
	cfg := runtime.DefaultConfig()
	bk, _ := h.New(b, cfg.LeaseDuration)
	ctx := context.Background()
	type member struct {
		c       *runtime.Client
		g       *runtime.Group
		started chan time.Time
	}
	var members [2]*member
	start := func(m *member) {
		var err error
		m.g, err = m.c.StartGroup("group", 1, runtime.Schedule{}, func(ctx context.Context, _ *runtime.Term, _ int) error {
			select {
			case m.started <- time.Now():
			default:
			}
			<-ctx.Done()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	joined := func(m *member) {
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if gs := m.c.Snapshot().Groups; len(gs) == 1 && gs[0].Joined && gs[0].Members == 2 {
				return
			}
			if time.Now().After(end) {
				b.Fatal("a member did not see both members within 10s")
			}
		}
	}
	for i := range members {
		c, err := runtime.NewClient(h.same(b, bk), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(ctx) })
		members[i] = &member{c: c, started: make(chan time.Time, 1)}
	}
	start(members[0])
	<-members[0].started
	start(members[1])
	joined(members[1])
	holder := 0
	var lat []time.Duration
	for b.Loop() {
		time.Sleep(20 * time.Millisecond) // as in the engine sub-benchmark
		other := 1 - holder
		t0 := time.Now()
		if err := members[holder].g.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-members[other].started:
			lat = append(lat, at.Sub(t0))
		case <-time.After(10 * time.Second):
			b.Fatalf("hand-over %d: the other member did not take the partition within 10s", len(lat))
		}
		start(members[holder])
		joined(members[holder])
		joined(members[other])
		holder = other
	}
	reportMicros(b, lat, 0.5, "p50-µs")
	reportMicros(b, lat, 0.99, "p99-µs")
	reportMicros(b, lat, 1, "max-µs")
}

func readCounters(cs []Counter) []float64 {
	out := make([]float64, len(cs))
	for i, c := range cs {
		out[i] = c.Read()
	}
	return out
}

// reportMicros reports the q-quantile of d in µs (q = 1: the largest).
func reportMicros(b *testing.B, d []time.Duration, q float64, unit string) {
	if len(d) > 0 {
		b.ReportMetric(float64(quantile(d, q).Microseconds()), unit)
	}
}

// quantile returns the q-quantile of d (q = 1: the largest), 0 if d is
// empty.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
