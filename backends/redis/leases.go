package simbaredis

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/simba-go/simba/backends"
)

func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if err := args.Name("acquire", name); err != nil {
		return backends.Grant{}, err
	}
	r, err := s.b.run(ctx, scriptAcquire, "acquire", s.idArg, s.acquireArgs(name)...)
	if err != nil {
		return backends.Grant{}, err
	}
	return s.granted(name, r)
}

// acquireArgs returns the arguments of the acquire script for name, after
// the session's.
func (s *session) acquireArgs(name string) []any {
	if g, i, ok := backends.SplitPartition(name); ok {
		return []any{name, s.b.node, g, i}
	}
	return []any{name, s.b.node}
}

// granted decodes the acquire script's reply r for name.
func (s *session) granted(name string, r reply) (backends.Grant, error) {
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
		e := &backends.RecoveringError{Remaining: fromMicros(r.int(1)), MaxLease: s.b.maxLease, Why: whyRecovering}
		if until := r.int(2); until > 0 {
			e.Until = storeTime(until)
		}
		s.b.guardLog.Refused(s.b.logger, "simbaredis", e, slog.String("prefix", s.b.prefix))
		return backends.Grant{}, fmt.Errorf("simbaredis: acquire %q: %w", name, e)
	}
	return backends.Grant{}, s.b.unexpected("acquire", r)
}

func (s *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	if err := args.Name("release", name); err != nil {
		return backends.Digest{}, err
	}
	r, err := s.b.run(ctx, scriptRelease, "release", s.idArg, releaseArgs(name, token)...)
	if err != nil {
		return backends.Digest{}, err
	}
	return s.released(r)
}

// releaseArgs returns the arguments of the release script for name and
// token, after the session's.
func releaseArgs(name string, token backends.Token) []any {
	if g, i, ok := backends.SplitPartition(name); ok {
		return []any{name, int64(token), g, i}
	}
	return []any{name, int64(token)}
}

// released decodes the release script's reply r.
func (s *session) released(r reply) (backends.Digest, error) {
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

// whyRecovering is what the amnesia guard of a namespace says it guards
// against (see the package documentation).
const whyRecovering = "Redis may have lost the namespace's state (a restart without persistence, an older snapshot, " +
	"a fail-over), or the namespace is new on a Redis that started less than the maximum lease ago"
