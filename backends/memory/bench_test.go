package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/backends/memory"
)

// benchHarness describes the memory store to the shared benchmarks: a new
// store each, whose call counters count the calls a benchmark makes.
func benchHarness() backendtest.BenchHarness {
	return backendtest.BenchHarness{
		New: func(b *testing.B, maxLease time.Duration) (backends.Backend, []backendtest.Counter) {
			s := memory.New(memory.WithMaxLease(max(maxLease, memory.DefaultMaxLease)))
			calls := func() float64 { return float64(s.Faults().Calls().Total()) }
			return s, []backendtest.Counter{{Unit: "calls", Read: calls, PerKeepAlive: 1}}
		},
		InProcess:      true,
		KeepAliveJoins: true,
	}
}

// One acquire and one release of a free lease: two store calls.
func BenchmarkAcquireRelease(b *testing.B) { backendtest.BenchmarkAcquireRelease(b, benchHarness()) }

// S1: a keep-alive costs the same whatever the number of leases held, and is
// exactly one store call.
func BenchmarkKeepAlive(b *testing.B) { backendtest.BenchmarkKeepAlive(b, benchHarness()) }

// A1: a graceful hand-off, at the backend level and through the engine.
func BenchmarkHandOff(b *testing.B) { backendtest.BenchmarkHandOff(b, benchHarness()) }

// Reaping: every operation first reaps expired sessions from a heap, so a
// store with many live sessions costs no more per call.
func BenchmarkKeepAliveManySessions(b *testing.B) {
	for _, sessions := range []int{1, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			s := memory.New()
			ctx := context.Background()
			for range sessions - 1 {
				if _, _, err := s.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute}); err != nil {
					b.Fatal(err)
				}
			}
			sess, _, err := s.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sess.KeepAlive(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// One client holding many leases (SIMBA_BENCH_LEASES, default 10,000) with
// the default timings: the time to hold them all, the renewals meanwhile,
// and Close.
//
//	SIMBA_BENCH_LEASES=1000000 go test -run='^$' -bench=HeldLeases -benchtime=1x -timeout=30m ./backends/memory/
func BenchmarkHeldLeases(b *testing.B) { backendtest.BenchmarkHeldLeases(b, benchHarness()) }
