package simbapg

import (
	"os"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/backendtest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

func TestMain(m *testing.M) {
	if os.Getenv(backendtest.WatchTurnsEnv) != "" {
		os.Exit(watchTurnsChild())
	}
	goleak.VerifyTestMain(m)
}

// sharedDSN returns the URL of the shared test database.
func sharedDSN(t testing.TB) string {
	t.Helper()
	return testservers.Postgres(t)
}

// poolConfig parses dsn for the tests' pools: a few connections each (the
// shared server serves other checkouts' tests too), and dials through link
// if it is not nil.
func poolConfig(t testing.TB, dsn string, link *faultnet.Link) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing %s: %v", dsn, err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	if link != nil {
		cfg.ConnConfig.DialFunc = link.Dial
	}
	return cfg
}

// newPool returns a pool of dsn (through link, if not nil), closed when the
// test ends.
func newPool(t testing.TB, dsn string, link *faultnet.Link) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), poolConfig(t, dsn, link))
	if err != nil {
		t.Fatalf("pool of %s: %v", dsn, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// uniqueSchema returns a schema name no other test uses.
func uniqueSchema() string {
	var b [6]byte
	rand.Read(b[:])
	return "simbatest_" + hex.EncodeToString(b[:])
}

// newBackend returns a backend on pool with a fresh schema, created and
// ready to grant leases. When the test ends it is closed and its schema is
// dropped, through admin (a pool that reaches the server directly: pool may
// go through a cut link).
//
// A schema that is created starts the amnesia guard: no lease for MaxLease
// (§15). newBackend ends the guard at once (endGuard), so that tests do not
// wait for it; the tests of the guard use guardedBackend.
func newBackend(t testing.TB, pool, admin *pgxpool.Pool, opts ...Option) *Backend {
	t.Helper()
	b := guardedBackend(t, pool, admin, opts...)
	endGuard(t, admin, b.Schema())
	return b
}

// sharedBackend is newBackend on a pool of its own to the shared server,
// with an admin pool to it.
func sharedBackend(t testing.TB, opts ...Option) (b *Backend, admin *pgxpool.Pool) {
	t.Helper()
	dsn := sharedDSN(t)
	admin = newPool(t, dsn, nil)
	return newBackend(t, newPool(t, dsn, nil), admin, opts...), admin
}

// guardedBackend is newBackend without ending the amnesia guard.
func guardedBackend(t testing.TB, pool, admin *pgxpool.Pool, opts ...Option) *Backend {
	t.Helper()
	b, err := New(pool, append([]Option{WithSchema(uniqueSchema()), WithMaxLease(testConfig.LeaseDuration)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		b.Close()
		dropSchema(t, admin, b.Schema())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
}

// sameSchema returns another backend on the schema of b, through pool:
// another node of the same cluster.
func sameSchema(t testing.TB, b *Backend, pool *pgxpool.Pool, opts ...Option) *Backend {
	t.Helper()
	nb, err := New(pool, append([]Option{WithSchema(b.Schema()), WithMaxLease(b.MaxLease()), WithNotifications(b.notify)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { nb.Close() })
	return nb
}

// endGuard moves the start of the schema's amnesia guard far into the past.
func endGuard(t testing.TB, admin *pgxpool.Pool, schema string) {
	t.Helper()
	mustExec(t, admin, "UPDATE "+pgx.Identifier{schema}.Sanitize()+".meta SET guard_from = '-infinity'")
}

func dropSchema(t testing.TB, admin *pgxpool.Pool, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Logf("dropping schema %s: %v", schema, err)
	}
}

// exec runs a statement on pool and fails the test if it fails.
func mustExec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// expireSession ends the session's time behind its client's back: the
// database treats it as expired from now on, and the next call that meets
// it ends it.
func expireSession(t testing.TB, admin *pgxpool.Pool, schema string, id backends.SessionID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag, err := admin.Exec(ctx, "UPDATE "+pgx.Identifier{schema}.Sanitize()+".sessions SET expires_at = clock_timestamp() - interval '1 microsecond' WHERE id = $1 AND expires_at > clock_timestamp()", string(id))
	if err != nil {
		t.Fatalf("expiring session %s: %v", id, err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("expiring session %s: no such live session", id)
	}
}

// waitFor polls cond every few milliseconds until it holds or d passed.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustOpen opens a session on b, closed when the test ends.
func mustOpen(t testing.TB, b *Backend, ttl time.Duration) backends.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: ttl, Identity: t.Name()})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil && !errors.Is(err, backends.ErrSessionExpired) && !errors.Is(err, backends.ErrClosed) {
			t.Logf("closing session %s: %v", s.ID(), err)
		}
	})
	return s
}
