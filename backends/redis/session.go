package simbaredis

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/sessionid"
)

// OpenSession opens a session that Redis expires opts.TTL after its last
// renewal, measured by Redis's clock, with opts.Identity recorded. A TTL
// longer than MaxLease is clamped to it; the reply says what was granted. A
// TTL below a microsecond or an invalid identity is an error. Sessions open
// during the amnesia guard; only grants wait.
func (b *Backend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if err := args.Session(opts, time.Microsecond); err != nil {
		return nil, backends.Renewal{}, err
	}
	if b.readOnly {
		return nil, backends.Renewal{}, fmt.Errorf("simbaredis: open session: %w", ErrReadOnly)
	}
	ttl := min(opts.TTL, b.maxLease)
	s := newSession(b, string(sessionid.New()))
	r, err := b.run(ctx, scriptOpen, "open session", s.idArg, micros(ttl), opts.Identity)
	if err != nil {
		return nil, backends.Renewal{}, err
	}
	return s, renewal(r), nil
}

// renewal decodes the reply of the open, keep-alive and owned scripts:
// status, remaining (µs), now (µs), leases, version, groups.
func renewal(r reply) backends.Renewal {
	return backends.Renewal{
		Remaining: fromMicros(r.int(1)),
		StoreTime: storeTime(r.int(2)),
		Digest:    digest(r),
	}
}

func digest(r reply) backends.Digest {
	return backends.Digest{Leases: int(r.int(3)), Version: uint64(r.int(4)), Groups: uint64(r.int(5))}
}

// session is a client's handle on a session in Redis. It holds only the id:
// every call is a script that checks, by Redis's clock, that the session is
// alive, so a session Redis forgot (expired, closed, lost) stays dead
// (S3).
type session struct {
	b     *Backend
	id    string
	idArg any // id, made an interface once (see Backend.run)
}

func newSession(b *Backend, id string) *session { return &session{b: b, id: id, idArg: id} }

// noSession is the session argument of calls without one (check).
var noSession any = ""

var (
	_ backends.Session  = (*session)(nil)
	_ backends.Notifier = (*session)(nil)
)

func (s *session) ID() backends.SessionID { return backends.SessionID(s.id) }

func (s *session) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	r, err := s.b.run(ctx, scriptKeepAlive, "keep-alive", s.idArg)
	if err != nil {
		return backends.Renewal{}, err
	}
	return renewal(r), nil
}

// Owned reads the owned set in pages of ownedPage entries, one call each,
// so that no call blocks Redis for long. If the digest changes between the
// first page and the last (the session acquired or released meanwhile), it
// reads again, up to three times, and then reports the last reading's
// digest with what it read, which the engine checks again at its next
// renewal.
func (s *session) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	var (
		held []backends.Held
		d    backends.Digest
	)
	for range 3 {
		held = held[:0]
		var first backends.Digest
		for start := 0; ; start += ownedPage {
			r, err := s.b.run(ctx, scriptOwned, "owned", s.idArg, start, ownedPage)
			if err != nil {
				return nil, backends.Digest{}, err
			}
			if start == 0 {
				first = digest(r)
			}
			d = digest(r)
			flat := r.list(6)
			for i := 0; i+1 < len(flat); i += 2 {
				name, _ := flat[i].(string)
				tok, _ := flat[i+1].(string)
				// The token is a sorted set's score: below 2^53, so exact
				// in a float64, and written by Redis as an integer.
				f, err := strconv.ParseFloat(tok, 64)
				if err != nil || f != float64(int64(f)) || f <= 0 {
					return nil, backends.Digest{}, fmt.Errorf("simbaredis: owned: lease %q has token %q", name, tok)
				}
				held = append(held, backends.Held{Name: name, Token: backends.Token(f)})
			}
			if len(flat) < 2*ownedPage {
				break
			}
		}
		if d == first {
			break
		}
	}
	slices.SortFunc(held, func(a, b backends.Held) int { return cmp.Compare(a.Name, b.Name) })
	return held, d, nil
}

// Close ends the session in its one call: from then on, what it holds is
// free to others. The call releases up to reapBudget leases and memberships,
// waking their watchers, so that it never blocks Redis for long; a session
// that holds more is swept by the backend after Close returned, a call at a
// time (see Backend.sweep), so that a client closing a million leases
// does not wait for its records to be deleted.
func (s *session) Close(ctx context.Context) error {
	r, err := s.b.run(ctx, scriptClose, "close", s.idArg)
	if err != nil {
		return err
	}
	switch r.status() {
	case "OK":
		return nil
	case "MORE":
		s.b.sweep(s.idArg)
		return nil
	}
	return s.b.unexpected("close", r)
}

// sweepCallTimeout bounds each call of a sweep.
const sweepCallTimeout = 5 * time.Second

// sweep goes on releasing what the closed session id still has on record,
// reapBudget leases and memberships per call, on a goroutine of the
// backend's, until none is left, a call fails (other sessions' renewals then
// reap the rest), or the backend is closed.
func (b *Backend) sweep(id any) {
	b.sweeps.Go(sweepCallTimeout, func(ctx context.Context) (bool, error) {
		r, err := b.run(ctx, scriptClose, "close", id)
		return err == nil && r.status() == "MORE", err
	}, func(err error) {
		b.logger.Debug("simbaredis: sweeping a closed session stopped; other sessions' renewals reap the rest",
			slog.String("prefix", b.prefix), slog.Any("err", err))
	})
}
