// Package bench measures what the generated typed-steps wrapper costs per
// step: its loop (iterate the source, EnsureValid before each item, call
// the step) against the loops a person would write by hand. The step
// itself does nothing but count, so the loop is all there is to measure.
package bench

import (
	"context"
	"iter"
	"time"

	"github.com/simba-go/simba/runtime"
)

// Counter counts N steps and reports how long they took, from the start
// of the first to the end of the last.
type Counter struct {
	N     int
	Done  chan time.Duration
	start time.Time
}

// NewCounter returns a counter of n steps.
func NewCounter(n int) *Counter { return &Counter{N: n, Done: make(chan time.Duration, 1)} }

// Step is one step; it runs once per item of Numbers, in one run.
//
//simba:scheduled lease=bench.generated rate=1h items=Numbers
func (c *Counter) Step(ctx context.Context, t *runtime.Term, i int) error {
	if i == 0 {
		c.start = time.Now()
	}
	if i == c.N-1 {
		c.Done <- time.Since(c.start)
	}
	return nil
}

// Numbers yields 0 to N-1.
func (c *Counter) Numbers(ctx context.Context, t *runtime.Term) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		for i := range c.N {
			if !yield(i, nil) {
				return
			}
		}
	}
}
