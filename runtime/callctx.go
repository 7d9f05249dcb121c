package runtime

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of one backend call: it ends at the call's
// deadline, or when the call returned. It is context.WithDeadline without
// the cost a call that never waits does not need: its channel and timer
// are made only if the backend asks for Done (the memory store only reads
// Err), and AfterFunc spares a goroutine per context derived from it.
type callCtx struct {
	deadline time.Time

	mu    sync.Mutex
	err   error
	done  chan struct{}
	timer *time.Timer
	after []*afterCall
}

type afterCall struct {
	f       func()
	stopped bool
}

func (x *callCtx) Deadline() (time.Time, bool) { return x.deadline, true }
func (x *callCtx) Value(any) any               { return nil }

func (x *callCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err == nil && !time.Now().Before(x.deadline) {
		x.finish(context.DeadlineExceeded)
	}
	return x.err
}

func (x *callCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
		switch d := time.Until(x.deadline); {
		case x.err != nil:
			close(x.done)
		case d <= 0:
			x.finish(context.DeadlineExceeded)
		default:
			x.timer = time.AfterFunc(d, x.expire)
		}
	}
	return x.done
}

// AfterFunc is context.AfterFunc's hook (see the context package), so that
// contexts derived from x need no goroutine to follow it.
func (x *callCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterCall{f: f}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		go f()
		return func() bool { return false }
	}
	x.after = append(x.after, a)
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		if a.stopped || x.err != nil {
			return false
		}
		a.stopped = true
		return true
	}
}

func (x *callCtx) expire() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.finish(context.DeadlineExceeded)
}

// end cancels x once the call returned.
func (x *callCtx) end() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.timer != nil {
		x.timer.Stop()
	}
	x.finish(context.Canceled)
}

// finish ends x with err, if it has not ended. The caller holds x.mu.
func (x *callCtx) finish(err error) {
	if x.err != nil {
		return
	}
	x.err = err
	if x.done != nil {
		close(x.done)
	}
	for _, a := range x.after {
		if !a.stopped {
			go a.f()
		}
	}
	x.after = nil
}
