package simbapg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/backends/internal/watch"
)

// probeWithin bounds the wait for the notification a new LISTEN connection
// sends itself (see listener.Subscribe); closeWithin bounds the goodbye to
// the server when a subscription ends.
const (
	probeWithin = 3 * time.Second
	closeWithin = time.Second
)

// listener is the schema's release channel as a watch.Source: one dedicated
// connection per (re)connection, LISTENing on the channel, kept by the
// backend's watch.Feed.
type listener struct{ b *Backend }

// Subscribe dials a connection of its own from the pool's connection config
// (pool.Config().ConnConfig, with the pool's BeforeConnect hook): a pooled
// connection would hand notifications to whichever query ran on it next.
// After LISTEN, it sends the channel a probe through the pool and waits for
// it: behind a pooler in transaction mode (PgBouncer's pool_mode =
// transaction) LISTEN seems to succeed, but the notifications go to the
// server connection that ran it, which the pooler has handed to others. A
// connection that answers a ping but not the probe is such a case: the error
// wraps watch.ErrUnsupported, and the feed stops trying.
func (l listener) Subscribe(ctx context.Context) (watch.Subscription, error) {
	b := l.b
	pc := b.pool.Config()
	cfg := pc.ConnConfig.Copy()
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "simbapg listener"
	}
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cfg); err != nil {
			return nil, fmt.Errorf("simbapg: listen on %s: BeforeConnect: %w", b.channel, err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("simbapg: listen on %s: %w", b.channel, err)
	}
	fail := func(err error) (watch.Subscription, error) {
		cctx, cancel := context.WithTimeout(context.Background(), closeWithin)
		defer cancel()
		conn.Close(cctx)
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		return fail(fmt.Errorf("simbapg: listen on %s: %w", b.channel, err))
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	probe := " probe " + hex.EncodeToString(nonce[:]) // no lease name: the feed ignores it
	if _, err := b.pool.Exec(ctx, "SELECT pg_notify($1, $2)", b.channel, probe); err != nil {
		return fail(fmt.Errorf("simbapg: listen on %s: sending the probe: %w", b.channel, err))
	}
	s := &subscription{conn: conn}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	wait, cancel := context.WithTimeout(ctx, probeWithin)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wait)
		if err != nil {
			if ctx.Err() == nil && wait.Err() != nil {
				// No probe: is the connection alive?
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				perr := conn.Ping(pctx)
				pcancel()
				if perr == nil {
					return fail(fmt.Errorf("simbapg: listen on %s: the connection answers, but not with the notification it sent "+
						"itself within %v (is a pooler in transaction mode in the way?): %w", b.channel, probeWithin, watch.ErrUnsupported))
				}
			}
			return fail(fmt.Errorf("simbapg: listen on %s: waiting for the probe: %w", b.channel, err))
		}
		if n.Payload == probe {
			break
		}
		s.pending = append(s.pending, release(n)) // a release that came first
	}
	b.listenerPID.Store(conn.PgConn().PID())
	return s, nil
}

// subscription is one LISTEN connection.
type subscription struct {
	conn    *pgx.Conn
	ctx     context.Context // ended by Close, which ends a Receive in progress
	cancel  context.CancelFunc
	mu      sync.Mutex // held while the connection is in use
	pending []watch.Release
	closed  bool
}

// release decodes a notification: "name session", the lease and the session
// that released it (see schema.sql).
func release(n *pgconn.Notification) watch.Release {
	name, from, _ := strings.Cut(n.Payload, " ")
	return watch.Release{Name: name, From: from}
}

func (s *subscription) Receive(ctx context.Context, timeout time.Duration) (watch.Release, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 {
		r := s.pending[0]
		s.pending = s.pending[1:]
		return r, true, nil
	}
	if s.closed || s.ctx.Err() != nil {
		return watch.Release{}, false, errors.New("simbapg: listen: subscription closed")
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	n, err := s.conn.WaitForNotification(wait)
	if err != nil {
		if ctx.Err() == nil && s.ctx.Err() == nil && errors.Is(wait.Err(), context.DeadlineExceeded) && !s.conn.IsClosed() {
			return watch.Release{}, false, nil // nothing arrived in time; the connection stays usable
		}
		return watch.Release{}, false, err
	}
	return release(n), true, nil
}

// Ping checks the connection with an empty statement; the answer comes
// within the call.
func (s *subscription) Ping(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, errors.New("simbapg: listen: subscription closed")
	}
	return true, s.conn.Ping(ctx)
}

// Close ends a Receive in progress, then closes the connection. It may be
// called more than once, and while Receive runs.
func (s *subscription) Close() error {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	return s.conn.Close(ctx)
}

// Watch calls fn each time name may have become free: a release, a close or
// a reaped expiry of its holder's session notified on the schema's channel,
// unless the holder was this session (it knows what it released), and —
// since notifications sent meanwhile are lost — every time the backend's
// LISTEN connection (re)connects. fn runs on the backend's listening
// goroutine and must return quickly; calls of one watch never overlap. The
// returned stop waits for a call of fn in progress, so fn must not call its
// own stop. Under WithNotifications(false), fn is never called. The package
// documentation describes the connection.
func (s *session) Watch(name string, fn func()) (stop func()) {
	if !s.b.notify {
		return func() {}
	}
	return s.b.feed.Watch(s.id, name, fn)
}
