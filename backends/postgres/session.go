package simbapg

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
)

// session is a client's handle on a session row. It holds only the id:
// every call is one function call that checks, by the database's clock, that
// the session is alive, so a session the database ended or forgot stays dead
// (S3).
type session struct {
	b  *Backend
	id string
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

func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	const what = "acquire"
	if err := args.Name(what, name); err != nil {
		return backends.Grant{}, err
	}
	var group, part any // NULL unless name is a partition name
	if g, i, ok := backends.SplitPartition(name); ok {
		group, part = g, int32(i)
	}
	var (
		status            string
		tok, v, remaining *int64
		n                 *int32
		value             []byte
		holder, identity  *string
	)
	err := s.b.call(ctx, what, name, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.acquire, s.id, name, group, part, s.b.maxLease, s.b.notify).
			Scan(&status, &tok, &value, &n, &v, &holder, &identity, &remaining)
	})
	if err != nil {
		return backends.Grant{}, err
	}
	switch status {
	case "OK":
		if tok == nil || *tok <= 0 {
			return backends.Grant{}, s.b.errorf(what, name, "token %v from schema %s", tok, s.b.schema)
		}
		return backends.Grant{
			Token:  backends.Token(*tok),
			Value:  value,
			Digest: backends.Digest{Leases: int(*n), Version: uint64(*v)},
		}, nil
	case "HELD":
		h := backends.Holder{Session: backends.SessionID(deref(holder)), Identity: deref(identity)}
		if tok != nil {
			h.Token = backends.Token(*tok)
		}
		if remaining != nil {
			h.Remaining = max(0, time.Duration(*remaining)*time.Microsecond)
		}
		return backends.Grant{}, s.b.errorf(what, name, "%w", &backends.HeldError{Name: name, Holder: h})
	case "RECOVERING":
		var wait time.Duration
		if remaining != nil {
			wait = time.Duration(*remaining) * time.Microsecond
		}
		s.b.logGuard(wait)
		return backends.Grant{}, s.b.errorf(what, name, "schema %s is new, and may replace one that was lost: %w, "+
			"no grants for another %v: %w", s.b.schema, backends.ErrRecovering, wait.Round(time.Millisecond), backends.ErrLeaseHeld)
	case "EXPIRED":
		return backends.Grant{}, s.expired(what, name)
	}
	return backends.Grant{}, s.b.unexpected(what, status)
}

func (s *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	const what = "release"
	if err := args.Name(what, name); err != nil {
		return backends.Digest{}, err
	}
	var (
		status string
		n      *int32
		v      *int64
	)
	err := s.b.call(ctx, what, name, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.release, s.id, name, int64(token), s.b.notify).Scan(&status, &n, &v)
	})
	if err != nil {
		return backends.Digest{}, err
	}
	switch status {
	case "OK":
		return backends.Digest{Leases: int(*n), Version: uint64(*v)}, nil
	case "EXPIRED":
		return backends.Digest{}, s.expired(what, name)
	}
	return backends.Digest{}, s.b.unexpected(what, status)
}

func (s *session) Holder(ctx context.Context, name string) (backends.Holder, error) {
	const what = "holder"
	if err := args.Name(what, name); err != nil {
		return backends.Holder{}, err
	}
	var (
		status           string
		holder, identity *string
		tok, remaining   *int64
	)
	err := s.b.call(ctx, what, name, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.holder, s.id, name).Scan(&status, &holder, &identity, &tok, &remaining)
	})
	if err != nil {
		return backends.Holder{}, err
	}
	switch status {
	case "OK":
	case "EXPIRED":
		return backends.Holder{}, s.expired(what, name)
	default:
		return backends.Holder{}, s.b.unexpected(what, status)
	}
	if holder == nil {
		return backends.Holder{}, nil
	}
	return backends.Holder{
		Session:   backends.SessionID(*holder),
		Identity:  deref(identity),
		Token:     backends.Token(*tok),
		Remaining: max(0, time.Duration(*remaining)*time.Microsecond),
	}, nil
}

func (s *session) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	const what = "put value"
	if err := args.Value(what, name, value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // stored: NULL means none was ever stored
	}
	var status string
	err := s.b.call(ctx, what, name, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.putValue, s.id, name, int64(token), value).Scan(&status)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "NOTHOLDER":
		return s.b.errorf(what, name, "token %d: %w", token, backends.ErrNotHolder)
	case "EXPIRED":
		return s.expired(what, name)
	}
	return s.b.unexpected(what, status)
}

func (s *session) Join(ctx context.Context, group string, partitions int) error {
	const what = "join"
	if err := args.Group(what, group, partitions); err != nil {
		return err
	}
	var (
		status string
		parts  *int32
	)
	err := s.b.call(ctx, what, group, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.join, s.id, group, int32(partitions), s.b.notify).Scan(&status, &parts)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "MISMATCH":
		return s.b.errorf(what, group, "%d partitions, its members have %d: %w", partitions, deref(parts), backends.ErrGroupMismatch)
	case "EXPIRED":
		return s.expired(what, group)
	}
	return s.b.unexpected(what, status)
}

func (s *session) Leave(ctx context.Context, group string) error {
	const what = "leave"
	if err := args.Name(what, group); err != nil {
		return err
	}
	var status string
	err := s.b.call(ctx, what, group, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.leave, s.id, group).Scan(&status)
	})
	if err != nil {
		return err
	}
	switch status {
	case "OK":
		return nil
	case "EXPIRED":
		return s.expired(what, group)
	}
	return s.b.unexpected(what, status)
}

func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	const what = "members"
	if err := args.Name(what, group); err != nil {
		return backends.GroupView{}, err
	}
	var (
		status    string
		parts     *int32
		members   []string
		indexes   []int32
		holderIDs []string
	)
	err := s.b.call(ctx, what, group, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.members, s.id, group).Scan(&status, &parts, &members, &indexes, &holderIDs)
	})
	if err != nil {
		return backends.GroupView{}, err
	}
	switch status {
	case "OK":
	case "EXPIRED":
		return backends.GroupView{}, s.expired(what, group)
	default:
		return backends.GroupView{}, s.b.unexpected(what, status)
	}
	var v backends.GroupView
	if parts == nil || *parts == 0 || len(members) == 0 {
		return v, nil
	}
	v.Partitions = int(*parts)
	v.Members = make([]backends.SessionID, len(members))
	for i, m := range members {
		v.Members[i] = backends.SessionID(m)
	}
	slices.Sort(v.Members)
	v.Holders = make([]backends.SessionID, v.Partitions)
	for i, idx := range indexes {
		if 0 <= idx && int(idx) < v.Partitions && i < len(holderIDs) {
			v.Holders[idx] = backends.SessionID(holderIDs[i])
		}
	}
	return v, nil
}

// Close ends the session in its first call: from then on, what it holds is
// free to others. Each call releases up to 1,000 leases and memberships,
// waking their watchers, so that none holds locks for long; a session that
// holds more takes more calls, until it is gone or ctx ends — then Close
// returns nil, since the session has ended, and the reaping of other
// sessions' calls (or an acquire of one of its leases) finishes the job.
func (s *session) Close(ctx context.Context) error {
	const what = "close"
	for ended := false; ; ended = true {
		var status string
		err := s.b.call(ctx, what, "", func(q querier) error {
			return q.QueryRow(ctx, s.b.sql.close, s.id, s.b.notify).Scan(&status)
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

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
