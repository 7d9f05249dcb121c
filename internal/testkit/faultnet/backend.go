package faultnet

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
)

// Backend returns b as one node reaches it through the link: the path of a
// node to a store that has no network, such as the in-process memory store
// (a store with one uses a dialer: [Link.Dial]). The link's faults act on
// every call the node makes, and on nothing else: other nodes on b are not
// touched. While the link is cut a call fails at once; while it is
// blackholed, it waits until the link heals or its context ends; a request
// delay holds the call before it reaches b, a reply delay holds its result
// (b has acted by then). A call that gives up fails with an error wrapping
// backends.ErrUnavailable, and the context's error if that is why. Release
// notifications (backends.Notifier) are lost while the link is cut or
// blackholed, as a subscription's messages would be.
//
// The backend it returns offers backends.StoreClock, and its sessions
// backends.Notifier, if b and its sessions do.
func (l *Link) Backend(b backends.Backend) backends.Backend {
	lb := &linkBackend{b: b, l: l}
	if _, ok := b.(backends.StoreClock); ok {
		return &linkClockBackend{lb}
	}
	return lb
}

type linkBackend struct {
	b backends.Backend
	l *Link
}

type linkClockBackend struct{ *linkBackend }

// StoreTime forwards the store's clock through the link.
func (lb *linkClockBackend) StoreTime(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := lb.l.call(ctx, func(ctx context.Context) (err error) {
		t, err = lb.b.(backends.StoreClock).StoreTime(ctx)
		return err
	})
	return t, err
}

func (lb *linkBackend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	var (
		s backends.Session
		r backends.Renewal
	)
	err := lb.l.call(ctx, func(ctx context.Context) (err error) {
		s, r, err = lb.b.OpenSession(ctx, opts)
		return err
	})
	if err != nil {
		if s != nil { // opened, but the reply was lost on the way back
			s.Close(context.Background())
		}
		return nil, backends.Renewal{}, err
	}
	ls := &linkSession{s: s, l: lb.l}
	if _, ok := s.(backends.Notifier); ok {
		return &linkNotifierSession{ls}, r, nil
	}
	return ls, r, nil
}

// call makes one call of the node through the link: it waits while the link
// is blackholed, fails while it is cut, and holds the request and the reply
// for the link's delays, all bounded by ctx.
func (l *Link) call(ctx context.Context, do func(ctx context.Context) error) error {
	if err := l.pass(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	hold, delay := l.hold, l.delay
	l.mu.Unlock()
	if err := sleep(ctx, hold); err != nil {
		return err
	}
	if err := l.pass(ctx); err != nil {
		return err
	}
	err := do(ctx)
	if err := sleep(ctx, delay); err != nil {
		return err
	}
	if err2 := l.pass(ctx); err2 != nil {
		return err2 // the reply is lost on the way back
	}
	return err
}

// pass returns nil while the link is up and an error while it is cut, and
// while it is blackholed waits until it heals or ctx ends.
func (l *Link) pass(ctx context.Context) error {
	if err := l.wait(ctx.Done(), nil, nil); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("faultnet: %w: %w", backends.ErrUnavailable, ctx.Err())
		}
		return fmt.Errorf("faultnet: %w: %w", backends.ErrUnavailable, err)
	}
	return nil
}

// up reports whether the link is up.
func (l *Link) up() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == up
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("faultnet: %w: %w", backends.ErrUnavailable, ctx.Err())
	}
}

type linkSession struct {
	s backends.Session
	l *Link
}

type linkNotifierSession struct{ *linkSession }

// Watch forwards the store's notifications while the link is up.
func (ls *linkNotifierSession) Watch(name string, fn func()) (stop func()) {
	return ls.s.(backends.Notifier).Watch(name, func() {
		if ls.l.up() {
			fn()
		}
	})
}

func (ls *linkSession) ID() backends.SessionID { return ls.s.ID() }

func (ls *linkSession) KeepAlive(ctx context.Context) (r backends.Renewal, err error) {
	err = ls.l.call(ctx, func(ctx context.Context) error { r, err = ls.s.KeepAlive(ctx); return err })
	return r, err
}

func (ls *linkSession) Owned(ctx context.Context) (held []backends.Held, d backends.Digest, err error) {
	err = ls.l.call(ctx, func(ctx context.Context) error { held, d, err = ls.s.Owned(ctx); return err })
	return held, d, err
}

func (ls *linkSession) Acquire(ctx context.Context, name string) (g backends.Grant, err error) {
	err = ls.l.call(ctx, func(ctx context.Context) error { g, err = ls.s.Acquire(ctx, name); return err })
	return g, err
}

func (ls *linkSession) Release(ctx context.Context, name string, token backends.Token) (d backends.Digest, err error) {
	err = ls.l.call(ctx, func(ctx context.Context) error { d, err = ls.s.Release(ctx, name, token); return err })
	return d, err
}

func (ls *linkSession) Holder(ctx context.Context, name string) (h backends.Holder, err error) {
	err = ls.l.call(ctx, func(ctx context.Context) error { h, err = ls.s.Holder(ctx, name); return err })
	return h, err
}

func (ls *linkSession) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	return ls.l.call(ctx, func(ctx context.Context) error { return ls.s.PutValue(ctx, name, token, value) })
}

func (ls *linkSession) Join(ctx context.Context, group string, partitions int) error {
	return ls.l.call(ctx, func(ctx context.Context) error { return ls.s.Join(ctx, group, partitions) })
}

func (ls *linkSession) Leave(ctx context.Context, group string) error {
	return ls.l.call(ctx, func(ctx context.Context) error { return ls.s.Leave(ctx, group) })
}

func (ls *linkSession) Members(ctx context.Context, group string) (v backends.GroupView, err error) {
	err = ls.l.call(ctx, func(ctx context.Context) error { v, err = ls.s.Members(ctx, group); return err })
	return v, err
}

// Close closes the session through the link; one that cannot reach the
// store leaves it to expire there, as a node whose network is down would.
func (ls *linkSession) Close(ctx context.Context) error {
	return ls.l.call(ctx, func(ctx context.Context) error { return ls.s.Close(ctx) })
}
