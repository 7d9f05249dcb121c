package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
)

// syncDriver performs the machine's effects synchronously against a real
// backend, on the caller's goroutine, with a clock the caller moves: the
// machine alone, without the Client's goroutines. Benchmarks use it to count
// exactly what one renewal costs; a simulator builds on the same idea.
type syncDriver struct {
	tb       testing.TB
	m        *machine
	b        backends.Backend
	now      mono
	sessions map[uint64]backends.Session
}

func newSyncDriver(tb testing.TB, b backends.Backend, cfg Config) *syncDriver {
	d := &syncDriver{tb: tb, b: b, sessions: make(map[uint64]backends.Session)}
	d.m = newMachine(cfg, 1, func() mono { return d.now }, nil)
	d.m.tick(0)
	d.run()
	return d
}

func (d *syncDriver) run() {
	ctx := context.Background()
	for {
		effs := d.m.takeEffects()
		if len(effs) == 0 {
			return
		}
		for _, e := range effs {
			switch e.kind {
			case effSend:
				var res result
				s := d.sessions[e.req.gen]
				switch e.req.kind {
				case reqOpen:
					var opened backends.Session
					opened, res.renewal, res.err = d.b.OpenSession(ctx, backends.SessionOptions{TTL: e.req.ttl})
					if res.err == nil {
						d.sessions[e.req.gen], res.session = opened, opened.ID()
					}
				case reqKeepAlive:
					res.renewal, res.err = s.KeepAlive(ctx)
				case reqOwned:
					res.held, res.digest, res.err = s.Owned(ctx)
				case reqAcquire:
					res.grant, res.err = s.Acquire(ctx, e.req.name)
				case reqRelease:
					res.digest, res.err = s.Release(ctx, e.req.name, e.req.token)
				case reqClose:
					res.err = s.Close(ctx)
				}
				d.m.done(d.now, e.req.id, res)
			case effDispatch:
				d.m.callbackDone(d.now, e.c)
			case effStartTask:
				d.tb.Fatal("syncDriver runs no tasks")
			}
		}
	}
}

func (d *syncDriver) advance(to mono) {
	d.now = to
	d.m.tick(to)
	d.run()
}

// BenchmarkRenewal measures one renewal of a session holding 1, 100 and
// 10,000 leases: the engine's work plus the memory store's, on one
// goroutine. It reports backend calls per renewal, which must be exactly 1
// whatever the number of leases (SPEC S1).
func BenchmarkRenewal(b *testing.B) {
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			store := memory.New()
			d := newSyncDriver(b, store, DefaultConfig())
			for i := range n {
				c := &contender{name: fmt.Sprintf("lease-%d", i), cat: catElection}
				if err := d.m.start(d.now, c); err != nil {
					b.Fatal(err)
				}
				d.run()
			}
			// One renewal to settle the digest after the acquisitions.
			d.advance(d.m.sess.renewAt)
			held := 0
			for _, c := range d.m.contenders {
				if c.term != nil {
					held++
				}
			}
			if held != n {
				b.Fatalf("holding %d leases, want %d", held, n)
			}
			store.Faults().ResetCalls()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				d.advance(d.m.sess.renewAt)
			}
			b.StopTimer()
			calls := store.Faults().Calls()
			perRenewal := float64(calls.Total()) / float64(b.N)
			b.ReportMetric(perRenewal, "calls/renewal")
			if calls.Total() != int64(b.N) || calls.KeepAlive != int64(b.N) {
				b.Fatalf("%d renewals made %+v backend calls, want exactly one keep-alive each", b.N, calls)
			}
		})
	}
}

// T3: Valid, Remaining and a passing EnsureValid allocate nothing.
func TestTermReadsDoNotAllocate(t *testing.T) {
	var d deadline
	d.set(mono(time.Hour))
	start := time.Now()
	term := newTerm(nil, "report", 7, &d, func() mono { return time.Since(start) })
	allocs := testing.AllocsPerRun(1000, func() {
		if !term.Valid() || term.Remaining() <= 0 || term.EnsureValid(time.Second) != nil {
			t.Fatal("term not valid")
		}
	})
	if allocs != 0 {
		t.Fatalf("Valid/Remaining/EnsureValid allocate %v times per call, want 0", allocs)
	}
}

// BenchmarkTermValid measures Valid and Remaining (target: 0 allocations).
func BenchmarkTermValid(b *testing.B) {
	var d deadline
	d.set(mono(time.Hour))
	start := time.Now()
	term := newTerm(nil, "report", 7, &d, func() mono { return time.Since(start) })
	b.ReportAllocs()
	for b.Loop() {
		if !term.Valid() || term.Remaining() <= 0 {
			b.Fatal("invalid")
		}
	}
}
