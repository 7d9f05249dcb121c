package simbamysql

import (
	"context"
	"database/sql"
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
		group, part = g, int64(i)
	}
	var (
		status           string
		tok, n, v, left  sql.NullInt64
		value            []byte
		holder, identity sql.NullString
	)
	err := s.b.call(ctx, what, name, func() error {
		value = nil
		return s.b.queryRow(ctx, s.b.sql.acquire, []any{&status, &tok, &value, &n, &v, &holder, &identity, &left},
			s.id, name, group, part, s.b.maxLease.Microseconds())
	})
	if err != nil {
		return backends.Grant{}, err
	}
	switch status {
	case "OK":
		if !tok.Valid || tok.Int64 <= 0 {
			return backends.Grant{}, s.b.errorf(what, name, "token %v from the procedures of prefix %s", tok, s.b.prefix)
		}
		s.b.bells.held(s.id, name)
		return backends.Grant{
			Token:  backends.Token(tok.Int64),
			Value:  value,
			Digest: backends.Digest{Leases: int(n.Int64), Version: uint64(v.Int64)},
		}, nil
	case "HELD":
		h := backends.Holder{
			Session:   backends.SessionID(holder.String),
			Identity:  identity.String,
			Token:     backends.Token(tok.Int64),
			Remaining: max(0, time.Duration(left.Int64)*time.Microsecond),
		}
		return backends.Grant{}, s.b.errorf(what, name, "%w", &backends.HeldError{Name: name, Holder: h})
	case "RECOVERING":
		e := s.b.recovering(time.Duration(left.Int64) * time.Microsecond)
		s.b.guardLog.Refused(s.b.logger, "simbamysql", e, slog.String("prefix", s.b.prefix))
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
	var (
		status string
		n, v   sql.NullInt64
	)
	err := s.b.call(ctx, what, name, func() error {
		return s.b.queryRow(ctx, s.b.sql.release, []any{&status, &n, &v}, s.id, name, int64(token))
	})
	if err != nil {
		return backends.Digest{}, err
	}
	switch status {
	case "OK":
		s.b.bells.released(s.id, name)
		return backends.Digest{Leases: int(n.Int64), Version: uint64(v.Int64)}, nil
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
		holder, identity sql.NullString
		tok, left        sql.NullInt64
	)
	err := s.b.call(ctx, what, name, func() error {
		return s.b.queryRow(ctx, s.b.sql.holder, []any{&status, &holder, &identity, &tok, &left}, s.id, name)
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
	if !holder.Valid {
		return backends.Holder{}, nil
	}
	return backends.Holder{
		Session:   backends.SessionID(holder.String),
		Identity:  identity.String,
		Token:     backends.Token(tok.Int64),
		Remaining: max(0, time.Duration(left.Int64)*time.Microsecond),
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
	err := s.b.call(ctx, what, name, func() error {
		return s.b.queryRow(ctx, s.b.sql.putValue, []any{&status}, s.id, name, int64(token), value)
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
