package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
)

// One acquire and one release of a free lease: two store calls.
func BenchmarkAcquireRelease(b *testing.B) {
	s := memory.New()
	ctx := context.Background()
	sess, _, err := s.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		g, err := sess.Acquire(ctx, "lease")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sess.Release(ctx, "lease", g.Token); err != nil {
			b.Fatal(err)
		}
	}
}

// S1: a keep-alive costs the same whatever the number of leases held, and is
// exactly one store call.
func BenchmarkKeepAlive(b *testing.B) {
	for _, leases := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("leases=%d", leases), func(b *testing.B) {
			s := memory.New()
			ctx := context.Background()
			sess, _, err := s.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			for i := range leases {
				if _, err := sess.Acquire(ctx, fmt.Sprintf("lease-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			if err := sess.Join(ctx, "group", 4); err != nil {
				b.Fatal(err)
			}
			s.Faults().ResetCalls()
			b.ReportAllocs()
			for b.Loop() {
				r, err := sess.KeepAlive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if r.Digest.Leases != leases {
					b.Fatalf("digest counts %d leases; want %d", r.Digest.Leases, leases)
				}
			}
			calls := s.Faults().Calls()
			if calls.KeepAlive != int64(b.N) || calls.Total() != int64(b.N) {
				b.Fatalf("%d keep-alives made %+v calls; want exactly one call each", b.N, calls)
			}
			b.ReportMetric(float64(calls.Total())/float64(b.N), "calls/op")
		})
	}
}

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
