package simbazk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// adminTimeout is the session timeout of the backend's own connection.
const adminTimeout = 10 * time.Second

// adminConn is the backend's own connection, for StoreTime and Inspect: a
// ZooKeeper session that holds nothing, opened when first needed and again
// after it expired.
type adminConn struct {
	conn    *zk.Conn
	w       *wire
	ready   chan struct{} // closed at the first StateHasSession
	authed  chan struct{} // closed once the credentials are in place (at once without WithDigest)
	authErr error         // why they could not be, set before authed is closed
	dead    chan struct{}
	gone    chan struct{}
	once    sync.Once
	ronce   sync.Once
}

func (a *adminConn) expire() {
	a.once.Do(func() { close(a.dead); a.w.end(); go a.conn.Close() })
}

func (a *adminConn) close() {
	a.expire()
	select {
	case <-a.gone:
	case <-time.After(5 * time.Second):
	}
}

// adminDo runs fn on the backend's own connection, bounded by ctx.
func (b *Backend) adminDo(ctx context.Context, op string, fn func(c *zk.Conn) error) error {
	if b.closed.Load() {
		return b.closedErr(op, "")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simbazk: %s: %w", op, err)
	}
	b.mu.Lock()
	a := b.admin
	if a != nil {
		select {
		case <-a.dead:
			a = nil
		default:
		}
	}
	if a == nil {
		w := newWire(b.dial, b.servers, b.dialBound(adminTimeout), false)
		a = &adminConn{w: w, ready: make(chan struct{}), authed: make(chan struct{}), dead: make(chan struct{}), gone: make(chan struct{})}
		cb := func(ev zk.Event) {
			if ev.Type != zk.EventSession {
				return
			}
			switch ev.State {
			case zk.StateHasSession:
				a.ronce.Do(func() { close(a.ready) })
			case zk.StateExpired:
				a.expire()
			}
		}
		conn, events, err := b.connect(adminTimeout, w, cb)
		if err != nil {
			b.mu.Unlock()
			return fmt.Errorf("simbazk: %s: %w", op, err)
		}
		a.conn = conn
		go func() {
			for range events {
			}
			close(a.gone)
		}()
		// The credentials go first, before any request of adminDo's
		// (which waits for authed), then go-zookeeper sends them first
		// on every reconnection.
		go func() {
			defer close(a.authed)
			select {
			case <-a.ready:
				if b.digest != "" {
					a.authErr = b.authenticate(conn, w)
				}
			case <-a.dead:
				a.authErr = errors.New("the connection ended")
			}
		}()
		b.admin = a
	}
	b.mu.Unlock()
	select {
	case <-a.authed:
		if a.authErr != nil {
			a.expire() // the next call connects anew
			return b.unavailable(ctx, op, "", fmt.Errorf("authenticating with the digest credentials: %w", a.authErr))
		}
	case <-ctx.Done():
		why := a.w.dialErrors()
		if why == "" {
			why = "no session established"
		}
		return b.unavailable(ctx, op, "", fmt.Errorf("no ZooKeeper server of %v answered in time (%s)", b.servers, why))
	}
	done := make(chan error, 1)
	go func() { done <- fn(a.conn) }()
	select {
	case err := <-done:
		if errors.Is(err, zk.ErrSessionExpired) {
			a.expire()
		}
		return err
	case <-ctx.Done():
		return b.unavailable(ctx, op, "", errors.New("ZooKeeper did not answer in time"))
	}
}

// adminErr turns an error of adminDo into the contract's errors.
func (b *Backend) adminErr(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backends.ErrClosed), errors.Is(err, backends.ErrUnavailable), errors.Is(err, ErrLayout),
		ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("simbazk: %s: ZooKeeper refused it under %s (check WithDigest's credentials and the ACLs of the root's nodes): %w: %w",
			op, b.root, ErrNotAuthorized, err)
	}
	return b.unavailable(ctx, op, "", err)
}
