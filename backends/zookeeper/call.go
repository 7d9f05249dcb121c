package simbazk

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// do runs fn on the session's connection, on a goroutine of its own, and
// waits for it until ctx ends or the session ends. It returns fn's error
// unwrapped (ZooKeeper's errors, for the caller to sort), or an error that
// wraps ctx's error, or the session's end.
func (s *session) do(ctx context.Context, op, name string, fn func(c *zk.Conn) error) error {
	if err := s.alive(ctx, op, name); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn(s.conn) }()
	select {
	case err := <-done:
		if err != nil && s.isDead() {
			return s.deadErr(op, name)
		}
		if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) {
			// The connection failed under the call, which may or may not
			// have run, or the call was queued while go-zookeeper had no
			// connection and it gave up on it before its pause between
			// rounds of the servers (a second). Whether the session
			// survived is known once go-zookeeper has reconnected: wait
			// for that, within ctx, so that an expired session is reported
			// as such, at once, rather than at the caller's next retry.
			s.mu.Lock()
			up := s.up
			s.mu.Unlock()
			select {
			case <-up:
			case <-s.dead:
				return s.deadErr(op, name)
			case <-ctx.Done():
			}
		}
		return err
	case <-ctx.Done():
		return s.b.unavailable(ctx, op, name, errors.New("ZooKeeper did not answer in time (the call may still run)"))
	case <-s.dead:
		if s.b.closed.Load() {
			return s.b.closedErr(op, name)
		}
		return s.deadErr(op, name)
	}
}

// fail turns an error of do that the caller did not expect into the
// contract's errors.
func (s *session) fail(ctx context.Context, op, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backends.ErrSessionExpired), errors.Is(err, backends.ErrClosed),
		errors.Is(err, backends.ErrUnavailable), errors.Is(err, ctx.Err()) && ctx.Err() != nil:
		return err // already ours
	case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, wireErrNewSession):
		s.end(errExpired)
		return s.deadErr(op, name)
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("%s: ZooKeeper refused it under %s (check WithDigest's credentials and the ACLs of the root's nodes): %w: %w",
			opName(op, name), s.b.root, ErrNotAuthorized, err)
	case errors.Is(err, ErrLayout):
		return fmt.Errorf("%s: %w", opName(op, name), err)
	}
	return s.b.unavailable(ctx, op, name, err)
}

// alive returns the error of a call made on a closed backend, an ended
// session or with an ended context, or nil: what do checks before it
// calls, for an answer given without a call.
func (s *session) alive(ctx context.Context, op, name string) error {
	if s.b.closed.Load() {
		return s.b.closedErr(op, name)
	}
	if s.isDead() {
		return s.deadErr(op, name)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", opName(op, name), err)
	}
	return nil
}

// lost ends the session because its node is gone (an operator deleted it,
// or the store lost it).
func (s *session) lost(op, name string) error {
	s.end(fmt.Errorf("its node %s is gone: %w", s.paths.session(s.id), backends.ErrSessionExpired))
	return s.deadErr(op, name)
}

// apiErrors are the errors ZooKeeper reports for the operation of a multi
// that failed it; the others report "runtime inconsistency".
var apiErrors = []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNoAuth, zk.ErrNotEmpty,
	zk.ErrNoChildrenForEphemerals, zk.ErrInvalidACL, zk.ErrSessionExpired, zk.ErrBadArguments, zk.ErrSessionMoved}

// multiErr returns the index and error of the operation that failed a
// multi, or -1 and the multi's error if none says.
func multiErr(res []zk.MultiResponse, err error) (int, error) {
	if err == nil {
		return -1, nil
	}
	for i, r := range res {
		for _, e := range apiErrors {
			if r.Error == e {
				return i, e
			}
		}
	}
	return -1, err
}

// parallel runs fns concurrently (go-zookeeper pipelines them on the
// connection) and returns the first error, in the order of fns.
func parallel(fns ...func() error) error {
	if len(fns) == 1 {
		return fns[0]()
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// authenticate adds the backend's digest credentials (WithDigest) to conn,
// whose session is established, before any other request of the backend on
// it: the callers send nothing before it returns. go-zookeeper records the
// credentials once ZooKeeper accepted them, and on every reconnection sends
// what it recorded before any queued request (its resendZkAuth). One window
// is left: a reconnection between ZooKeeper's reply and the recording would
// send none. A reconnection completes a handshake before it sends anything,
// and the wire makes that handshake's connection current (wire.current), so
// if the current connection is the same after AddAuth returned as before it
// was called, every later reconnection sends the credentials; otherwise
// authenticate adds them again. A connection that broke under the call
// (go-zookeeper then reconnects) is tried again too. Credentials added twice
// are sent twice, which ZooKeeper accepts.
func (b *Backend) authenticate(conn *zk.Conn, w *wire) error {
	var err error
	for range 5 {
		wc := w.current()
		err = conn.AddAuth("digest", []byte(b.digest))
		if err == nil && w.current() == wc {
			return nil
		}
		if err != nil && !errors.Is(err, zk.ErrConnectionClosed) {
			return err
		}
	}
	if err == nil {
		err = errors.New("the connection kept changing")
	}
	return err
}
