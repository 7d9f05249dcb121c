package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// Stopping one of several groups, and closing a client with several, must
// not disturb the others: the engine once ranged over its list of groups
// while a completed stop removed one from it, and read a nil group (found
// by simbagen's compile-and-run test of RegisterAll with three groups).
func TestStopOneOfSeveralGroups(t *testing.T) {
	fn := func(ctx context.Context, t *runtime.Term, p int) error { return nil }
	for range 10 {
		c, err := runtime.NewClient(memory.New(), runtime.Config{})
		if err != nil {
			t.Fatal(err)
		}
		groups := make([]*runtime.Group, 3)
		for i, name := range []string{"g1", "g2", "g3"} {
			if groups[i], err = c.StartGroup(name, 4, runtime.Schedule{}, fn); err != nil {
				t.Fatal(err)
			}
		}
		for len(groups[0].Partitions()) < 4 {
			time.Sleep(time.Millisecond)
		}
		if err := groups[0].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
