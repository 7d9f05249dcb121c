package simbapg

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/sessionid"
)

// OpenSession opens a session that PostgreSQL expires opts.TTL after its last
// renewal, measured by the database's clock, with opts.Identity recorded. A
// TTL longer than MaxLease is clamped to it; the reply says what was granted.
// A TTL below a microsecond or an invalid identity is an error. Sessions open
// during the amnesia guard; only grants wait.
func (b *Backend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if err := args.Session(opts, time.Microsecond); err != nil {
		return nil, backends.Renewal{}, err
	}
	ttl := min(opts.TTL, b.maxLease).Truncate(time.Microsecond)
	s := &session{b: b, id: string(sessionid.New())}
	var (
		status string
		r      renewalRow
	)
	err := b.call(ctx, "open session", "", func(q querier) error {
		return q.QueryRow(ctx, b.sql.open, s.id, ttl, opts.Identity, b.notify).Scan(&status, &r.ttlUS, &r.storeTime, &r.leases, &r.version, &r.groups)
	})
	if err != nil {
		return nil, backends.Renewal{}, err
	}
	if status != "OK" {
		return nil, backends.Renewal{}, b.unexpected("open session", status)
	}
	return s, r.renewal(), nil
}

// renewalRow is the reply of open_session and keep_alive.
type renewalRow struct {
	ttlUS     int64
	storeTime time.Time
	leases    int32
	version   int64
	groups    int64
}

func (r renewalRow) renewal() backends.Renewal {
	return backends.Renewal{
		Remaining: time.Duration(r.ttlUS) * time.Microsecond,
		StoreTime: r.storeTime.UTC(),
		Digest:    backends.Digest{Leases: int(r.leases), Version: uint64(r.version), Groups: uint64(r.groups)},
	}
}

// session is a client's handle on a session row. It holds only the id:
// every call is one function call that checks, by the database's clock, that
// the session is alive, so a session the database ended or forgot stays dead
// (S3).
type session struct {
	b  *Backend
	id string

	// groupMu serialises Join with the renewal's leaving again; unconfirmed
	// are the groups left since the last renewal, whose leave committed
	// without waiting for its flush (see groups.go).
	groupMu     sync.Mutex
	unconfirmed map[string]bool
}

var (
	_ backends.Session  = (*session)(nil)
	_ backends.Notifier = (*session)(nil)
)

func (s *session) ID() backends.SessionID { return backends.SessionID(s.id) }

// expired is the error of a call the database answered with EXPIRED.
func (s *session) expired(what, name string) error {
	return s.b.errorf(what, name, "session %s: %w", s.id, backends.ErrSessionExpired)
}

func (s *session) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	const what = "keep-alive"
	var (
		status string
		r      renewalRow
		ttl    *int64
		at     *time.Time
		n      *int32
		v, g   *int64
	)
	err := s.b.call(ctx, what, "", func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.keepAlive, s.id, s.b.notify).Scan(&status, &ttl, &at, &n, &v, &g)
	})
	if err != nil {
		return backends.Renewal{}, err
	}
	switch status {
	case "OK":
		r = renewalRow{ttlUS: *ttl, storeTime: *at, leases: *n, version: *v, groups: *g}
		s.confirmLeaves(ctx)
		return r.renewal(), nil
	case "EXPIRED":
		return backends.Renewal{}, s.expired(what, "")
	}
	return backends.Renewal{}, s.b.unexpected(what, status)
}

func (s *session) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	const what = "owned"
	var (
		status string
		n      *int32
		v, g   *int64
		names  []string
		tokens []int64
	)
	err := s.b.call(ctx, what, "", func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.owned, s.id).Scan(&status, &n, &v, &g, &names, &tokens)
	})
	if err != nil {
		return nil, backends.Digest{}, err
	}
	switch status {
	case "OK":
	case "EXPIRED":
		return nil, backends.Digest{}, s.expired(what, "")
	default:
		return nil, backends.Digest{}, s.b.unexpected(what, status)
	}
	if len(names) != len(tokens) {
		return nil, backends.Digest{}, fmt.Errorf("simbapg: owned: %d names and %d tokens from schema %s", len(names), len(tokens), s.b.schema)
	}
	held := make([]backends.Held, len(names))
	for i, name := range names {
		held[i] = backends.Held{Name: name, Token: backends.Token(tokens[i])}
	}
	return held, backends.Digest{Leases: int(*n), Version: uint64(*v), Groups: uint64(*g)}, nil
}

// Close ends the session in its first call: from then on, what it holds is
// free to others. Each call releases up to 1,000 leases and memberships,
// waking their watchers, so that none holds locks for long; a session that
// holds more is swept by the backend after Close returned, a call at a time
// (see Backend.sweep), so that a client closing a million leases does not
// wait for a thousand calls (the Redis backend does the same).
func (s *session) Close(ctx context.Context) error {
	const what = "close"
	var status string
	err := s.b.call(ctx, what, "", func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.close, s.id, s.b.notify).Scan(&status)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "MORE":
		s.b.sweep(s.id)
		return nil
	}
	return s.b.unexpected(what, status)
}

// sweepCallTimeout bounds each call of a sweep.
const sweepCallTimeout = 5 * time.Second

// sweep goes on releasing what the closed session id still has on record,
// 1,000 leases and memberships per call, on a goroutine of the backend's,
// until none is left, a call fails (the reaping of other sessions' calls,
// or an acquire of one of its leases, then finishes the job), or the
// backend is closed.
func (b *Backend) sweep(id string) {
	b.sweeps.Go(sweepCallTimeout, func(ctx context.Context) (bool, error) {
		var status string
		err := b.call(ctx, "close", "", func(q querier) error {
			return q.QueryRow(ctx, b.sql.close, id, b.notify).Scan(&status)
		})
		return err == nil && status == "MORE", err
	}, func(err error) {
		b.logger.Debug("simbapg: sweeping a closed session stopped; other sessions' calls reap the rest",
			slog.String("schema", b.schema), slog.Any("err", err))
	})
}
