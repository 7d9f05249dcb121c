package simbapg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/backends"
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

// Subscribe dials a connection of its own (dialOwn): a pooled
// connection would hand notifications to whichever query ran on it next.
// After LISTEN, it sends the channel a probe through the pool and waits for
// it: behind a pooler in transaction mode (PgBouncer's pool_mode =
// transaction) LISTEN seems to succeed, but the notifications go to the
// server connection that ran it, which the pooler has handed to others. A
// connection that answers a ping but not the probe is such a case: the error
// wraps watch.ErrUnsupported, and the feed stops trying.
func (l listener) Subscribe(ctx context.Context) (watch.Subscription, error) {
	b := l.b
	conn, err := b.dialOwn(ctx, "simbapg listener")
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

// release decodes a notification (see schema.sql): "name session token",
// the lease, the session that released it (or ended) and the token of the
// term that ended — a release hint, and the end of a term for the watches
// of holders; " g <token> <remaining µs> <session> <name> <identity>", a
// grant of a lease some backend follows; anything else starting with a
// space (a probe), nothing. Functions of revisions before 4 send "name
// session", a hint only.
func release(n *pgconn.Notification) watch.Release {
	p := n.Payload
	if strings.HasPrefix(p, " g ") {
		f := strings.SplitN(p[3:], " ", 5)
		if len(f) != 5 {
			return watch.Release{}
		}
		tok, err := strconv.ParseInt(f[0], 10, 64)
		us, _ := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return watch.Release{}
		}
		return watch.Release{Name: f[3], Change: &backends.Holder{Session: backends.SessionID(f[2]), Identity: f[4],
			Token: backends.Token(tok), Remaining: max(0, time.Duration(us)*time.Microsecond)}}
	}
	name, from, _ := strings.Cut(p, " ")
	from, tok, ok := strings.Cut(from, " ")
	r := watch.Release{Name: name, From: from}
	if t, err := strconv.ParseInt(tok, 10, 64); ok && err == nil {
		r.Change, r.Wake = &backends.Holder{Token: backends.Token(t)}, true
	}
	return r
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

// dialOwn dials a connection of the backend's own, outside the pool, from
// the pool's connection config (pool.Config().ConnConfig, with the pool's
// BeforeConnect hook), named app unless the config names one.
func (b *Backend) dialOwn(ctx context.Context, app string) (*pgx.Conn, error) {
	pc := b.pool.Config()
	cfg := pc.ConnConfig.Copy()
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = app
	}
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cfg); err != nil {
			return nil, fmt.Errorf("BeforeConnect: %w", err)
		}
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// followEvery is how often the backend's watch.Feed checks the follower's
// connection and reads the followed holders again (a connection that died
// took its locks with it, and grants of the names were not told since).
const followEvery = 5 * time.Second

// follower holds, on a connection of the backend's own, a shared advisory
// lock per lease name whose holder a session of the backend watches
// (backends.HolderNotifier): a grant of a name whose lock someone holds
// notifies the channel (granted in schema.sql). A lock is a read, not a
// write, and goes away with the connection: a crashed process leaves
// nothing behind. Only the feed's goroutine uses it, and only once the
// feed's LISTEN works (never through a pooler in transaction mode, where a
// session lock would stay on a server connection others use).
type follower struct {
	mu     sync.Mutex
	conn   *pgx.Conn
	locked map[string]bool // names locked on conn
}

// close closes the follower's connection, releasing its locks.
func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
}

func (f *follower) closeLocked() {
	if f.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
		f.conn.Close(ctx)
		cancel()
	}
	f.conn, f.locked = nil, nil
}

// followHolders is the backend's watch.FollowFunc: it locks names on the
// follower's connection (dialling it if needed), unlocks names nobody here
// watches any longer, and reads the holders of names through the schema's
// holders function, on the same connection, after the locks: a grant that
// committed before is read, one after is notified.
func (b *Backend) followHolders(ctx context.Context, names []string) (map[string]backends.Holder, error) {
	f := &b.follow
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.closed.Load() {
		return nil, backends.ErrClosed
	}
	if err := b.ensureSchema(ctx); err != nil {
		return nil, err
	}
	if f.conn == nil || f.conn.IsClosed() {
		f.closeLocked()
		conn, err := b.dialOwn(ctx, "simbapg follower")
		if err != nil {
			return nil, fmt.Errorf("simbapg: follow holders: %w", err)
		}
		f.conn, f.locked = conn, map[string]bool{}
	}
	fail := func(err error) (map[string]backends.Holder, error) {
		f.closeLocked()
		return nil, fmt.Errorf("simbapg: follow holders: %w", err)
	}
	const lockSQL = "SELECT pg_advisory_lock_shared(hashtextextended(k, 0)) FROM unnest($1::text[]) k"
	const unlockSQL = "SELECT pg_advisory_unlock_shared(hashtextextended(k, 0)) FROM unnest($1::text[]) k"
	var keys, lock, unlock []string
	for _, n := range names {
		if !f.locked[n] {
			keys, lock = append(keys, b.channel+" "+n), append(lock, n)
		}
	}
	if len(keys) > 0 {
		if _, err := f.conn.Exec(ctx, lockSQL, keys); err != nil {
			return fail(err)
		}
		for _, n := range lock {
			f.locked[n] = true
		}
	}
	keys = keys[:0]
	for n := range f.locked {
		if !b.feed.HolderWatched(n) {
			keys, unlock = append(keys, b.channel+" "+n), append(unlock, n)
		}
	}
	if len(keys) > 0 {
		if _, err := f.conn.Exec(ctx, unlockSQL, keys); err != nil {
			return fail(err)
		}
		for _, n := range unlock {
			delete(f.locked, n)
		}
	}
	rows, err := f.conn.Query(ctx, "SELECT name, h_session, h_identity, tok, h_remaining_us FROM "+
		pgx.Identifier{b.schema}.Sanitize()+".holders($1)", names)
	if err != nil {
		return fail(err)
	}
	out := make(map[string]backends.Holder, len(names))
	for rows.Next() {
		var (
			name              string
			session, identity *string
			tok               int64
			remaining         *int64
		)
		if err := rows.Scan(&name, &session, &identity, &tok, &remaining); err != nil {
			rows.Close()
			return fail(err)
		}
		h := backends.Holder{Session: backends.SessionID(deref(session)), Identity: deref(identity), Token: backends.Token(tok)}
		if remaining != nil {
			h.Remaining = max(0, time.Duration(*remaining)*time.Microsecond)
		}
		out[name] = h
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return out, nil
}

var _ backends.HolderNotifier = (*session)(nil)

// WatchHolder calls fn with each change of name's holder, in the
// database's commit order (backends.HolderNotifier): every end of a term
// (a release, a close, a reaped or taken-over expiry) is notified on the
// schema's channel with its token, and every grant of a name that a
// session of some backend watches (the backend holds an advisory lock on
// the name, see follower); short holds are included. The backend reads the
// holder once its lock is in place — and again after each reconnection of
// its LISTEN connection, and every few seconds — telling it if it is newer
// than what fn was told; fn is never told a change older than one it was
// told. fn runs on the backend's goroutines and must return quickly; calls
// of one watch never overlap. The returned stop waits for a call of fn in
// progress, so fn must not call its own stop. Under WithNotifications(false),
// or behind a pooler that does not pass notifications on, fn is never
// called (watchers read the holder on their own schedule). The package
// documentation describes the cost.
func (s *session) WatchHolder(name string, fn func(backends.Holder)) (stop func()) {
	return s.b.feed.WatchHolder(name, fn)
}
