//go:build simbagolden

package tagged

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// With the tag, the generated RegisterAll starts both functions of the
// tagged file.
func TestTaggedRuns(t *testing.T) {
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	regs, err := RegisterAll(c, &Exporter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 2 {
		t.Fatalf("RegisterAll started %d registrations; want 2", len(regs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for Runs.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Sync and Export ran %d times in 10s; want at least 3", Runs.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, r := range regs {
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("Stop %s: %v", r.Name(), err)
		}
	}
}
