package runtime_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// BenchmarkCloseManyElections measures Close of a client leading 10,000
// elections on the memory store: each input while closing costs O(1), so
// the whole close is linear in the number of elections.
func BenchmarkCloseManyElections(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		b.StopTimer()
		c, err := runtime.NewClient(memory.New(), runtime.Config{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if _, err := c.StartElection(fmt.Sprint("lease-", i), nil); err != nil {
				b.Fatal(err)
			}
		}
		for c.Snapshot().Leases[n-1].Role != runtime.RoleLeader {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
