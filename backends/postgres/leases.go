package simbapg

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backends"
)

func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	const what = "acquire"
	if err := args.Name(what, name); err != nil {
		return backends.Grant{}, err
	}
	var group, part any // NULL unless name is a partition name
	if g, i, ok := backends.SplitPartition(name); ok {
		group, part = g, int32(i)
	}
	var r acquireRow
	err := s.b.call(ctx, what, name, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.acquire, s.id, name, group, part, s.b.maxLease, s.b.notify).Scan(r.dest()...)
	})
	if err != nil {
		return backends.Grant{}, err
	}
	return s.granted(name, &r)
}

// acquireRow is the reply of the acquire function.
type acquireRow struct {
	status            string
	tok, v, remaining *int64
	n                 *int32
	value             []byte
	holder, identity  *string
}

// dest returns the row's fields in the order of the function's columns.
func (r *acquireRow) dest() []any {
	return []any{&r.status, &r.tok, &r.value, &r.n, &r.v, &r.holder, &r.identity, &r.remaining}
}

// granted decodes the acquire function's reply r for name.
func (s *session) granted(name string, r *acquireRow) (backends.Grant, error) {
	const what = "acquire"
	status, tok, v, remaining, n, value, holder, identity := r.status, r.tok, r.v, r.remaining, r.n, r.value, r.holder, r.identity
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
		e := &backends.RecoveringError{MaxLease: s.b.maxLease, Why: fmt.Sprintf(whyRecovering, s.b.schema)}
		if remaining != nil {
			e.Remaining = time.Duration(*remaining) * time.Microsecond
		}
		s.b.guardLog.Refused(s.b.logger, "simbapg", e, slog.String("schema", s.b.schema))
		return backends.Grant{}, s.b.errorf(what, name, "%w", e)
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
	var r releaseRow
	err := s.b.call(ctx, what, name, func(q querier) error {
		return q.QueryRow(ctx, s.b.sql.release, s.id, name, int64(token), s.b.notify).Scan(&r.status, &r.n, &r.v)
	})
	if err != nil {
		return backends.Digest{}, err
	}
	return s.released(name, &r)
}

// releaseRow is the reply of the release function.
type releaseRow struct {
	status string
	n      *int32
	v      *int64
}

// released decodes the release function's reply r for name.
func (s *session) released(name string, r *releaseRow) (backends.Digest, error) {
	const what = "release"
	status, n, v := r.status, r.n, r.v
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

// whyRecovering is what the amnesia guard of a schema says it guards
// against (see the package documentation); %s is the schema.
const whyRecovering = "schema %s is new, or start_guard() was called, and it may replace one that was lost " +
	"(a database restored from an older backup or recreated, a fail-over to a standby that missed writes, another server)"
