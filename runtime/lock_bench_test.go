package runtime_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// BenchmarkLockUnlock measures one uncontended Lock and Unlock of a name on
// the memory store, from the caller's goroutine: the engine's work, the
// driver's goroutines and channels, and the store's. Run it with -benchmem:
// its allocations per operation are the driver's overhead per pair.
func BenchmarkLockUnlock(b *testing.B) {
	benchPairs(b, (*runtime.Client).Lock)
}

// BenchmarkAcquireRelease is BenchmarkLockUnlock with TryLock, which gives
// up at the first refusal instead of waiting.
func BenchmarkAcquireRelease(b *testing.B) {
	benchPairs(b, (*runtime.Client).TryLock)
}

// benchPairs measures lock and Unlock of one name, uncontended.
func benchPairs(b *testing.B, lock func(*runtime.Client, context.Context, string) (*runtime.Term, error)) {
	c, err := runtime.NewClient(memory.New(), runtime.ConfigFor(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	if err := c.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		t, err := lock(c, ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Unlock(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockHandOff measures a graceful hand-off between two clients on
// one memory store, where the store costs next to nothing: from the
// holder's Unlock to the return of the other client's Lock, blocked in
// it meanwhile and woken by the store's release notification. What it
// measures is the driver's and the engine's path — the hops between
// goroutines — that every backend's hand-off adds to its store's round
// trips. Reported: median and p99 (run it with -benchtime=2000x).
func BenchmarkLockHandOff(b *testing.B) {
	store := memory.New()
	cfg := runtime.ConfigFor(time.Minute)
	ctx := context.Background()
	var cs [2]*runtime.Client
	for i := range cs {
		c, err := runtime.NewClient(store, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.Ready(ctx); err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	held, err := cs[0].Lock(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	holder := 0
	var lat []time.Duration
	for b.Loop() {
		waiter := 1 - holder
		got := make(chan *runtime.Term, 1)
		go func() {
			t, err := cs[waiter].Lock(ctx, "bench")
			if err != nil {
				b.Error(err)
			}
			got <- t
		}()
		time.Sleep(2 * time.Millisecond) // the waiter is refused, and waits
		t0 := time.Now()
		if err := cs[holder].Unlock(ctx, held); err != nil {
			b.Fatal(err)
		}
		held = <-got
		lat = append(lat, time.Since(t0))
		holder = waiter
	}
	b.StopTimer()
	cs[holder].Unlock(ctx, held)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
