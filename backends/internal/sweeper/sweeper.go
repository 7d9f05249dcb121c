// Package sweeper runs a backend's sweeps: work that goes on after the call
// that started it returned, a bounded call at a time, on goroutines the
// backend owns and waits for when it closes. The Redis and PostgreSQL
// backends sweep what a closed session still holds past what its close call
// released, so that a client closing a million leases does not wait for
// their records to be deleted.
package sweeper

import (
	"context"
	"sync"
	"time"
)

// Sweeper runs sweeps until it is closed. The zero value is not usable; use
// New.
type Sweeper struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	stop   context.CancelFunc
}

// New returns a Sweeper ready to run sweeps.
func New() *Sweeper {
	ctx, stop := context.WithCancel(context.Background())
	return &Sweeper{ctx: ctx, stop: stop}
}

// Go starts a sweep: step runs again and again on a goroutine of the
// Sweeper's, each time with a context that ends after callTimeout or when the
// Sweeper closes, until it reports that nothing is left (more false), fails
// (then failed, if not nil, gets the error and the sweep ends) or the
// Sweeper closes. Go after Close starts nothing.
func (s *Sweeper) Go(callTimeout time.Duration, step func(ctx context.Context) (more bool, err error), failed func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for s.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(s.ctx, callTimeout)
			more, err := step(ctx)
			cancel()
			if err != nil {
				if failed != nil {
					failed(err)
				}
				return
			}
			if !more {
				return
			}
		}
	}()
}

// Wait waits until the sweeps in progress have ended on their own (nothing
// left, or a failed step), without ending them. It must not run beside a
// call of Go that starts the first sweep (sync.WaitGroup's rule).
func (s *Sweeper) Wait() { s.wg.Wait() }

// Close ends the sweeps in progress (the call of each in flight sees its
// context end) and waits for their goroutines to return. Closing twice is
// harmless.
func (s *Sweeper) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
}
