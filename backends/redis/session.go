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
)

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

func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if err := args.Name("acquire", name); err != nil {
		return backends.Grant{}, err
	}
	var r reply
	var err error
	if g, i, ok := backends.SplitPartition(name); ok {
		r, err = s.b.run(ctx, scriptAcquire, "acquire", s.idArg, name, s.b.node, g, i)
	} else {
		r, err = s.b.run(ctx, scriptAcquire, "acquire", s.idArg, name, s.b.node)
	}
	if err != nil {
		return backends.Grant{}, err
	}
	switch r.status() {
	case "OK":
		tok := r.int(1)
		if tok <= 0 {
			return backends.Grant{}, fmt.Errorf("simbaredis: acquire %q: token %q from Redis", name, r.str(1))
		}
		g := backends.Grant{Token: backends.Token(tok), Digest: backends.Digest{Leases: int(r.int(2)), Version: uint64(r.int(3))}}
		if len(r) > 4 {
			if v, ok := r[4].(string); ok {
				g.Value = []byte(v)
			}
		}
		return g, nil
	case "HELD":
		return backends.Grant{}, fmt.Errorf("simbaredis: acquire %q: %w", name, &backends.HeldError{Name: name, Holder: holder(r)})
	case "RECOVERING":
		wait := fromMicros(r.int(1))
		s.b.logGuard(wait)
		return backends.Grant{}, fmt.Errorf("simbaredis: acquire %q: Redis lost its state (restart, older snapshot or "+
			"fail-over): %w, no grants for another %v: %w", name, backends.ErrRecovering, wait.Round(time.Millisecond),
			backends.ErrLeaseHeld)
	}
	return backends.Grant{}, s.b.unexpected("acquire", r)
}

func (s *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	if err := args.Name("release", name); err != nil {
		return backends.Digest{}, err
	}
	var r reply
	var err error
	if g, i, ok := backends.SplitPartition(name); ok {
		r, err = s.b.run(ctx, scriptRelease, "release", s.idArg, name, int64(token), g, i)
	} else {
		r, err = s.b.run(ctx, scriptRelease, "release", s.idArg, name, int64(token))
	}
	if err != nil {
		return backends.Digest{}, err
	}
	if r.status() != "OK" {
		return backends.Digest{}, s.b.unexpected("release", r)
	}
	return backends.Digest{Leases: int(r.int(1)), Version: uint64(r.int(2))}, nil
}

func (s *session) Holder(ctx context.Context, name string) (backends.Holder, error) {
	if err := args.Name("holder", name); err != nil {
		return backends.Holder{}, err
	}
	r, err := s.b.run(ctx, scriptHolder, "holder", s.idArg, name, s.b.node, s.b.maxLeaseArg)
	if err != nil {
		return backends.Holder{}, err
	}
	if r.status() != "OK" {
		return backends.Holder{}, s.b.unexpected("holder", r)
	}
	if len(r) < 5 {
		return backends.Holder{}, nil
	}
	return holder(r), nil
}

// holder decodes the holder in elements 1 to 4 of a reply (see luaHolder).
func holder(r reply) backends.Holder {
	return backends.Holder{
		Session:   backends.SessionID(r.str(1)),
		Token:     backends.Token(r.int(2)),
		Remaining: fromMicros(r.int(3)),
		Identity:  r.str(4),
	}
}

func (s *session) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	if err := args.Value("put value", name, value); err != nil {
		return err
	}
	r, err := s.b.run(ctx, scriptPutValue, "put value", s.idArg, name, int64(token), value)
	if err != nil {
		return err
	}
	switch r.status() {
	case "OK":
		return nil
	case "NOTHOLDER":
		return fmt.Errorf("simbaredis: put value %q with token %d: %w", name, token, backends.ErrNotHolder)
	}
	return s.b.unexpected("put value", r)
}

func (s *session) Join(ctx context.Context, group string, partitions int) error {
	if err := args.Group("join", group, partitions); err != nil {
		return err
	}
	r, err := s.b.run(ctx, scriptJoin, "join", s.idArg, group, partitions)
	if err != nil {
		return err
	}
	switch r.status() {
	case "OK":
		return nil
	case "MISMATCH":
		return fmt.Errorf("simbaredis: join %q with %d partitions, its members have %d: %w",
			group, partitions, r.int(1), backends.ErrGroupMismatch)
	}
	return s.b.unexpected("join", r)
}

func (s *session) Leave(ctx context.Context, group string) error {
	if err := args.Name("leave", group); err != nil {
		return err
	}
	r, err := s.b.run(ctx, scriptLeave, "leave", s.idArg, group)
	if err != nil {
		return err
	}
	if r.status() != "OK" {
		return s.b.unexpected("leave", r)
	}
	return nil
}

func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	if err := args.Name("members", group); err != nil {
		return backends.GroupView{}, err
	}
	r, err := s.b.run(ctx, scriptMembers, "members", s.idArg, group)
	if err != nil {
		return backends.GroupView{}, err
	}
	if r.status() != "OK" {
		return backends.GroupView{}, s.b.unexpected("members", r)
	}
	var v backends.GroupView
	v.Partitions = int(r.int(1))
	if v.Partitions == 0 {
		return v, nil
	}
	members := r.list(2)
	v.Members = make([]backends.SessionID, 0, len(members))
	for _, m := range members {
		id, _ := m.(string)
		v.Members = append(v.Members, backends.SessionID(id))
	}
	slices.Sort(v.Members)
	v.Holders = make([]backends.SessionID, v.Partitions)
	flat := r.list(3)
	for i := 0; i+1 < len(flat); i += 2 {
		idx, _ := flat[i].(string)
		id, _ := flat[i+1].(string)
		if n, err := strconv.Atoi(idx); err == nil && 0 <= n && n < v.Partitions {
			v.Holders[n] = backends.SessionID(id)
		}
	}
	return v, nil
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

// Watch calls fn each time name may have become free: a release, a close or
// a reaped expiry of its holder's session published on the namespace's
// channel, unless the holder was this session (it knows what it released),
// and — since releases published meanwhile are lost — every time the
// backend's subscription (re)connects. fn runs on the backend's subscription
// goroutine and must return quickly; calls of one watch never overlap. The
// returned stop waits for a call of fn in progress, so fn must not call its
// own stop. The package documentation describes the subscription.
func (s *session) Watch(name string, fn func()) (stop func()) {
	return s.b.feed.Watch(s.id, name, fn)
}

// unexpected reports a status a script should not return.
func (b *Backend) unexpected(what string, r reply) error {
	return fmt.Errorf("simbaredis: %s: unexpected reply %v", what, []any(r))
}

// logGuard logs, once per guard period, that the amnesia guard refuses
// grants.
func (b *Backend) logGuard(wait time.Duration) {
	end := time.Now().Add(wait).UnixMicro()
	last := b.guardLogged.Load()
	if end-last < micros(time.Second) || !b.guardLogged.CompareAndSwap(last, end) {
		return
	}
	b.logger.Warn("simbaredis: Redis lost its state (restart, older snapshot or fail-over); no lease is granted until every old holder's deadline has passed",
		slog.String("prefix", b.prefix), slog.Duration("remaining", wait))
}
