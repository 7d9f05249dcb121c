package simbamysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sharedURL returns the URL of the shared test database.
func sharedURL(t testing.TB) string {
	t.Helper()
	return testservers.MySQL(t)
}

// driverCfg returns the driver configuration of a test URL.
func driverCfg(t testing.TB, rawURL string) *mysql.Config {
	t.Helper()
	cfg, _, err := parseURL(rawURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", Redact(rawURL), err)
	}
	cfg.Timeout = 2 * time.Second
	cfg.Logger = mysql.Logger(quiet{})
	return cfg
}

type quiet struct{}

func (quiet) Print(...any) {}

// newDB returns a pool of rawURL (dialled through link, if not nil), closed
// when the test ends: a few connections (the shared server serves other
// checkouts' tests too).
func newDB(t testing.TB, rawURL string, link *faultnet.Link) *sql.DB {
	t.Helper()
	cfg := driverCfg(t, rawURL)
	if link != nil {
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := link.Dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return closeWakes{c}, nil
		}
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	t.Cleanup(func() { db.Close() })
	return db
}

// closeWakes is a faultnet connection whose Close ends a read or write
// waiting in a blackhole, as closing a socket does: go-sql-driver ends a call
// whose context ended by closing its connection (pgx sets a deadline, which
// faultnet's waits watch).
type closeWakes struct{ net.Conn }

func (c closeWakes) Close() error {
	c.Conn.SetDeadline(time.Unix(1, 0))
	return c.Conn.Close()
}

// uniquePrefix returns a prefix no other test uses.
func uniquePrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// newBackend returns a backend on db with a fresh prefix, its tables created
// and ready to grant leases. When the test ends it is closed and its tables
// and procedures are dropped, through admin (a pool that reaches the server
// directly: db may go through a cut link).
//
// Tables that are created start the amnesia guard: no lease for MaxLease
// (§15). newBackend ends the guard at once (endGuard), so that tests do not
// wait for it; the tests of the guard use guardedBackend.
func newBackend(t testing.TB, db, admin *sql.DB, opts ...Option) *Backend {
	t.Helper()
	b := guardedBackend(t, db, admin, opts...)
	endGuard(t, admin, b.Prefix())
	return b
}

// guardedBackend is newBackend without ending the amnesia guard.
func guardedBackend(t testing.TB, db, admin *sql.DB, opts ...Option) *Backend {
	t.Helper()
	b, err := New(db, append([]Option{WithPrefix(uniquePrefix()), WithMaxLease(testConfig.LeaseDuration)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		b.Close()
		dropTables(t, admin, b.Prefix())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
}

// samePrefix returns another backend on the tables of b, through db: another
// node of the same cluster.
func samePrefix(t testing.TB, b *Backend, db *sql.DB, opts ...Option) *Backend {
	t.Helper()
	nb, err := New(db, append([]Option{WithPrefix(b.Prefix()), WithMaxLease(b.MaxLease()), WithPollInterval(b.poll)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { nb.Close() })
	return nb
}

// endGuard moves the start of the prefix's amnesia guard far into the past.
func endGuard(t testing.TB, admin *sql.DB, prefix string) {
	t.Helper()
	mustExec(t, admin, "UPDATE "+prefix+"_meta SET guard_from_us = 0")
}

// dropTables drops the prefix's tables and routines.
func dropTables(t testing.TB, admin *sql.DB, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range tableNames {
		if _, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+"_"+name); err != nil {
			t.Logf("dropping %s_%s: %v", prefix, name, err)
		}
	}
	rows, err := admin.QueryContext(ctx, "SELECT routine_type, routine_name FROM information_schema.routines "+
		"WHERE routine_schema = DATABASE() AND routine_name LIKE ?", prefix+`\_%`)
	if err != nil {
		t.Logf("listing routines of %s: %v", prefix, err)
		return
	}
	var drops []string
	for rows.Next() {
		var kind, name string
		if rows.Scan(&kind, &name) == nil {
			drops = append(drops, "DROP "+kind+" IF EXISTS "+name)
		}
	}
	rows.Close()
	for _, d := range drops {
		if _, err := admin.ExecContext(ctx, d); err != nil {
			t.Logf("%s: %v", d, err)
		}
	}
}

// mustExec runs a statement on db and fails the test if it fails.
func mustExec(t testing.TB, db *sql.DB, query string, args ...any) sql.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return r
}

// expireSession ends the session's time behind its client's back: the
// database treats it as expired from now on, and the next call that meets it
// ends it.
func expireSession(t testing.TB, admin *sql.DB, prefix string, id backends.SessionID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := "CAST(@@timestamp * 1000000 AS SIGNED)"
	var n int
	err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+prefix+"_sessions WHERE id = ? AND expires_us > "+now, string(id)).Scan(&n)
	if err == nil && n == 1 {
		_, err = admin.ExecContext(ctx, "UPDATE "+prefix+"_sessions SET expires_us = "+now+" - 1 WHERE id = ?", string(id))
	}
	if err != nil {
		t.Fatalf("expiring session %s: %v", id, err)
	}
	if n != 1 {
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

// testCtx returns a context that ends with the test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
