package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
)

// gate stands between one node and the store. While the node is frozen it
// holds every call the node makes, as a stopped process sends nothing: the
// store hears no renewal and, after the lease, expires the session. When the
// node thaws, the held calls go on, late, as a resumed process's would.
type gate struct {
	mu     sync.Mutex
	thawed chan struct{} // non-nil while frozen; closed at thaw
}

func (g *gate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.thawed == nil {
		g.thawed = make(chan struct{})
	}
}

func (g *gate) thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.thawed != nil {
		close(g.thawed)
		g.thawed = nil
	}
}

// pass returns at once unless the node is frozen; then it waits for the
// thaw, or fails as an unreachable store would when ctx ends first.
func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	thawed := g.thawed
	g.mu.Unlock()
	if thawed == nil {
		return nil
	}
	select {
	case <-thawed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node frozen: %w (%w)", backends.ErrUnavailable, ctx.Err())
	}
}

// through returns f's results once the gate lets the call pass.
func through[T any](ctx context.Context, g *gate, f func() (T, error)) (T, error) {
	if err := g.pass(ctx); err != nil {
		var zero T
		return zero, err
	}
	return f()
}

// gatedBackend is a node's view of the shared backend.
type gatedBackend struct {
	backends.Backend
	g *gate
}

// gatedClockBackend is a gatedBackend whose store has a clock, which the
// runtime needs for schedules' slots.
type gatedClockBackend struct {
	gatedBackend
	clock backends.StoreClock
}

// gated returns b as node g sees it: every call passes the gate, and b's
// optional clock is kept.
func gated(b backends.Backend, g *gate) backends.Backend {
	gb := gatedBackend{Backend: b, g: g}
	if clock, ok := b.(backends.StoreClock); ok {
		return gatedClockBackend{gb, clock}
	}
	return gb
}

func (b gatedBackend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if err := b.g.pass(ctx); err != nil {
		return nil, backends.Renewal{}, err
	}
	s, r, err := b.Backend.OpenSession(ctx, opts)
	if err != nil {
		return nil, r, err
	}
	return gatedSession{s, b.g}, r, nil
}

func (b gatedClockBackend) StoreTime(ctx context.Context) (time.Time, error) {
	return through(ctx, b.g, func() (time.Time, error) { return b.clock.StoreTime(ctx) })
}

type gatedSession struct {
	s backends.Session
	g *gate
}

// nothing stands for the missing result of calls that return only an error.
type nothing struct{}

func (s gatedSession) errOnly(ctx context.Context, f func() error) error {
	_, err := through(ctx, s.g, func() (nothing, error) { return nothing{}, f() })
	return err
}

func (s gatedSession) ID() backends.SessionID { return s.s.ID() }

func (s gatedSession) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	return through(ctx, s.g, func() (backends.Renewal, error) { return s.s.KeepAlive(ctx) })
}

func (s gatedSession) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	if err := s.g.pass(ctx); err != nil {
		return nil, backends.Digest{}, err
	}
	return s.s.Owned(ctx)
}

func (s gatedSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	return through(ctx, s.g, func() (backends.Grant, error) { return s.s.Acquire(ctx, name) })
}

func (s gatedSession) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	return through(ctx, s.g, func() (backends.Digest, error) { return s.s.Release(ctx, name, token) })
}

func (s gatedSession) Holder(ctx context.Context, name string) (backends.Holder, error) {
	return through(ctx, s.g, func() (backends.Holder, error) { return s.s.Holder(ctx, name) })
}

func (s gatedSession) PutValue(ctx context.Context, name string, token backends.Token, v []byte) error {
	return s.errOnly(ctx, func() error { return s.s.PutValue(ctx, name, token, v) })
}

func (s gatedSession) Join(ctx context.Context, group string, n int) error {
	return s.errOnly(ctx, func() error { return s.s.Join(ctx, group, n) })
}

func (s gatedSession) Leave(ctx context.Context, group string) error {
	return s.errOnly(ctx, func() error { return s.s.Leave(ctx, group) })
}

func (s gatedSession) Members(ctx context.Context, group string) (backends.GroupView, error) {
	return through(ctx, s.g, func() (backends.GroupView, error) { return s.s.Members(ctx, group) })
}

func (s gatedSession) Close(ctx context.Context) error {
	return s.errOnly(ctx, func() error { return s.s.Close(ctx) })
}

// Watch forwards the store's release notifications, if it sends any.
func (s gatedSession) Watch(name string, fn func()) (stop func()) {
	n, ok := s.s.(backends.Notifier)
	if !ok {
		return func() {}
	}
	return n.Watch(name, fn)
}
