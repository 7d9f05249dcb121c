package bench

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// BenchmarkStep reports ns/step for the generated wrapper and for two
// hand-written loops, each run once through a real schedule on the memory
// backend with b.N items (issue 5: the generated wrapper's per-step
// overhead against a hand-written loop calling EnsureValid).
func BenchmarkStep(b *testing.B) {
	run := func(b *testing.B, start func(c *runtime.Client, k *Counter) error) {
		c, err := runtime.NewClient(memory.New(), runtime.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(context.Background())
		k := NewCounter(b.N)
		if err := start(c, k); err != nil {
			b.Fatal(err)
		}
		select {
		case d := <-k.Done:
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/step")
		case <-time.After(time.Minute):
			b.Fatal("no run within a minute")
		}
	}
	b.Run("generated", func(b *testing.B) {
		run(b, func(c *runtime.Client, k *Counter) error {
			_, err := RegisterCounterStep(c, k)
			return err
		})
	})
	b.Run("hand-written-seq", func(b *testing.B) {
		run(b, func(c *runtime.Client, k *Counter) error {
			_, err := c.StartSchedule("bench.hand", runtime.Schedule{Rate: time.Hour}, func(ctx context.Context, t *runtime.Term) error {
				for i, err := range k.Numbers(ctx, t) {
					if err != nil {
						return err
					}
					if err := t.EnsureValid(0); err != nil {
						return err
					}
					if err := k.Step(ctx, t, i); err != nil {
						return err
					}
				}
				return nil
			})
			return err
		})
	})
	b.Run("hand-written-for", func(b *testing.B) {
		run(b, func(c *runtime.Client, k *Counter) error {
			_, err := c.StartSchedule("bench.for", runtime.Schedule{Rate: time.Hour}, func(ctx context.Context, t *runtime.Term) error {
				for i := range k.N {
					if err := t.EnsureValid(0); err != nil {
						return err
					}
					if err := k.Step(ctx, t, i); err != nil {
						return err
					}
				}
				return nil
			})
			return err
		})
	})
}
