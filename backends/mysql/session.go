package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/sessionid"
)

// session is a client's handle on a session row. It holds only the id: every
// call is one procedure call that checks, by the database's clock, that the
// session is alive, so a session the database ended or forgot stays dead
// (S3).
type session struct {
	b  *Backend
	id string
}

var (
	_ backends.Session  = (*session)(nil)
	_ backends.Notifier = (*session)(nil)
)

// OpenSession opens a session that the database expires opts.TTL after its
// last renewal, measured by the database's clock, with opts.Identity
// recorded. A TTL longer than MaxLease is clamped to it; the reply says what
// was granted. A TTL below a microsecond or an invalid identity is an error.
// Sessions open during the amnesia guard; only grants wait. A backend opened
// read-only opens none.
func (b *Backend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if err := args.Session(opts, time.Microsecond); err != nil {
		return nil, backends.Renewal{}, err
	}
	if b.readOnly {
		return nil, backends.Renewal{}, errors.New("simbamysql: open session: the backend was opened read-only (WithReadOnly)")
	}
	ttl := min(opts.TTL, b.maxLease).Truncate(time.Microsecond)
	s := &session{b: b, id: string(sessionid.New())}
	var r renewalRow
	err := b.call(ctx, "open session", "", func() error {
		return b.queryRow(ctx, b.sql.open, r.dest(), s.id, ttl.Microseconds(), []byte(opts.Identity))
	})
	if err != nil {
		return nil, backends.Renewal{}, err
	}
	if r.status != "OK" {
		return nil, backends.Renewal{}, b.unexpected("open session", r.status)
	}
	return s, r.renewal(), nil
}

// renewalRow is the reply of simba_open and simba_keep_alive.
type renewalRow struct {
	status                   string
	ttlUS, storeUS, ver, grp sql.NullInt64
	leases                   sql.NullInt64
}

func (r *renewalRow) dest() []any {
	return []any{&r.status, &r.ttlUS, &r.storeUS, &r.leases, &r.ver, &r.grp}
}

func (r *renewalRow) renewal() backends.Renewal {
	return backends.Renewal{
		Remaining: time.Duration(r.ttlUS.Int64) * time.Microsecond,
		StoreTime: time.UnixMicro(r.storeUS.Int64).UTC(),
		Digest:    backends.Digest{Leases: int(r.leases.Int64), Version: uint64(r.ver.Int64), Groups: uint64(r.grp.Int64)},
	}
}

func (s *session) ID() backends.SessionID { return backends.SessionID(s.id) }

// expired is the error of a call the database answered with EXPIRED: the
// bells of its leases ring.
func (s *session) expired(what, name string) error {
	s.b.bells.ended(s.id)
	return s.b.errorf(what, name, "session %s: %w", s.id, backends.ErrSessionExpired)
}

func (s *session) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	const what = "keep-alive"
	var r renewalRow
	err := s.b.call(ctx, what, "", func() error {
		return s.b.queryRow(ctx, s.b.sql.keepAlive, r.dest(), s.id)
	})
	if err != nil {
		return backends.Renewal{}, err
	}
	switch r.status {
	case "OK":
		return r.renewal(), nil
	case "EXPIRED":
		return backends.Renewal{}, s.expired(what, "")
	}
	return backends.Renewal{}, s.b.unexpected(what, r.status)
}

func (s *session) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	const what = "owned"
	var (
		held []backends.Held
		d    backends.Digest
		live bool
	)
	err := s.b.call(ctx, what, "", func() error {
		held, live = held[:0], false
		return s.b.queryRows(ctx, s.b.sql.owned, func(rows *sql.Rows) error {
			var (
				kind    string
				name    sql.NullString
				a, v, g int64
			)
			if err := rows.Scan(&kind, &name, &a, &v, &g); err != nil {
				return err
			}
			switch kind {
			case "D":
				live, d = true, backends.Digest{Leases: int(a), Version: uint64(v), Groups: uint64(g)}
			case "L":
				held = append(held, backends.Held{Name: name.String, Token: backends.Token(a)})
			}
			return nil
		}, s.id)
	})
	if err != nil {
		return nil, backends.Digest{}, err
	}
	if !live {
		return nil, backends.Digest{}, s.expired(what, "")
	}
	return held, d, nil
}

// Close ends the session in its first call: from then on, what it holds is
// free to others. Each call releases up to 1,000 leases and memberships,
// recording the releases for the candidates that poll, so that none holds
// locks for long; a session that holds more takes more calls, until it is
// gone or ctx ends — then Close returns nil, since the session has ended,
// and the reaping of other sessions' calls (or an acquire of one of its
// leases) finishes the job.
func (s *session) Close(ctx context.Context) error {
	const what = "close"
	defer s.b.bells.ended(s.id)
	for ended := false; ; ended = true {
		var status string
		err := s.b.call(ctx, what, "", func() error {
			return s.b.queryRow(ctx, s.b.sql.close, []any{&status}, s.id)
		})
		if err != nil {
			if ended && ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch status {
		case "OK":
			return nil
		case "MORE":
			continue
		}
		return s.b.unexpected(what, status)
	}
}

// Watch calls fn each time name may have become free: a release, a close or
// a reaped expiry of its holder's session that the backend's poll of the
// database saw, unless the holder was this session (it knows what it
// released), every time the poll starts again after failing, and each time
// the lease's bell rings (its holder released it, or the holder's bell
// connection ended). fn runs on the backend's polling goroutine or on the
// bell's and must return quickly; calls of one watch never overlap. The
// returned stop waits for a call of fn in progress, so fn must not call its
// own stop. With WithPollInterval(0) and WithBells(0), fn is never called.
// The package documentation describes the poll and the bells.
func (s *session) Watch(name string, fn func()) (stop func()) {
	if fn == nil { // backends.Notifier: a nil fn watches nothing
		return func() {}
	}
	var mu sync.Mutex // the poll's calls and the bell's never overlap
	one := func() {
		mu.Lock()
		defer mu.Unlock()
		fn()
	}
	stopBell := s.b.bells.watch(name, one)
	if s.b.poll == 0 {
		return stopBell
	}
	stopPoll := s.b.feed.Watch(s.id, name, one)
	return func() {
		stopBell()
		stopPoll()
	}
}
