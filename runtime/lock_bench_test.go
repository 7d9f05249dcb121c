package runtime_test

import (
	"context"
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
