package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// syncDriver performs the machine's effects synchronously against a real
// backend, on the caller's goroutine, with a clock the caller moves: the
// machine alone, without the Client's goroutines — the simulator's perfect
// network. Benchmarks use it to count exactly what one renewal costs.
type syncDriver struct {
	tb       testing.TB
	m        *Machine
	b        backends.Backend
	now      Mono
	sessions map[uint64]backends.Session
}

func newSyncDriver(tb testing.TB, b backends.Backend, cfg vocab.Config) *syncDriver {
	d := &syncDriver{tb: tb, b: b, sessions: make(map[uint64]backends.Session)}
	d.m = New(cfg, 1)
	d.m.Tick(0)
	d.run()
	return d
}

func (d *syncDriver) run() {
	ctx := context.Background()
	for {
		effs, _, _ := d.m.Ready()
		if len(effs) == 0 {
			return
		}
		for i := range effs {
			e := &effs[i]
			switch e.Kind {
			case EffSend:
				var res Result
				s := d.sessions[e.Req.Gen]
				switch e.Req.Kind {
				case ReqOpen:
					var opened backends.Session
					opened, res.Renewal, res.Err = d.b.OpenSession(ctx, backends.SessionOptions{TTL: e.Req.TTL})
					if res.Err == nil {
						d.sessions[e.Req.Gen], res.Session = opened, opened.ID()
					}
				case ReqKeepAlive:
					res.Renewal, res.Err = s.KeepAlive(ctx)
				case ReqOwned:
					res.Held, res.Digest, res.Err = s.Owned(ctx)
				case ReqAcquire:
					res.Grant, res.Err = s.Acquire(ctx, e.Req.Name)
				case ReqRelease:
					res.Digest, res.Err = s.Release(ctx, e.Req.Name, e.Req.Token)
				case ReqClose:
					res.Err = s.Close(ctx)
				}
				d.m.Step(d.now, Reply{ID: e.Req.ID, Result: res})
			case EffDispatch:
				d.m.Step(d.now, CallbackDone{ID: e.Contender})
			case EffStartTask, EffStartRun:
				d.tb.Fatal("syncDriver runs no tasks")
			}
		}
	}
}

func (d *syncDriver) advance(to Mono) {
	d.now = to
	d.m.Tick(to)
	d.run()
}

// defaultCfg is the runtime's DefaultConfig: a 15s lease renewed every 5s.
var defaultCfg = vocab.Config{LeaseDuration: 15 * time.Second, RenewInterval: 5 * time.Second, Drift: 0.01,
	Margin: 50 * time.Millisecond, RetryJitter: 2500 * time.Millisecond, MinBackoff: 100 * time.Millisecond}

// BenchmarkRenewal measures one renewal of a session holding 1, 100 and
// 10,000 leases: the engine's work plus the memory store's, on one
// goroutine. It reports backend calls per renewal, which must be exactly 1
// whatever the number of leases (S1).
func BenchmarkRenewal(b *testing.B) {
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			store := memory.New()
			d := newSyncDriver(b, store, defaultCfg)
			for i := range n {
				if err := d.m.Step(d.now, Start{ID: ContenderID(i + 1), Name: fmt.Sprintf("lease-%d", i), Kind: KindElection}); err != nil {
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
