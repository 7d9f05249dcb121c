package simbapg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
)

func TestNewRejectsBadOptions(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://u@127.0.0.1:1/db") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cases := []struct {
		name string
		pool *pgxpool.Pool
		opts []Option
		want string // in the error
	}{
		{"nil pool", nil, nil, "nil pool"},
		{"empty schema", pool, []Option{WithSchema("")}, "WithSchema"},
		{"upper case", pool, []Option{WithSchema("Simba")}, "WithSchema"},
		{"leading digit", pool, []Option{WithSchema("1simba")}, "WithSchema"},
		{"quote", pool, []Option{WithSchema(`a"b`)}, "WithSchema"},
		{"reserved", pool, []Option{WithSchema("pg_simba")}, "reserved"},
		{"long schema", pool, []Option{WithSchema(strings.Repeat("s", maxSchemaLen+1))}, "WithSchema"},
		{"zero MaxLease", pool, []Option{WithMaxLease(0)}, "WithMaxLease"},
		{"sub-millisecond MaxLease", pool, []Option{WithMaxLease(time.Microsecond)}, "WithMaxLease"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := New(c.pool, c.opts...)
			if err == nil {
				b.Close()
				t.Fatalf("New = nil error; want one mentioning %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("New = %v; want an error mentioning %q", err, c.want)
			}
		})
	}
	long := strings.Repeat("s", maxSchemaLen)
	b, err := New(pool, WithSchema(long), WithMaxLease(1500*time.Microsecond+1))
	if err != nil {
		t.Fatalf("New with valid options: %v", err)
	}
	defer b.Close()
	if b.Schema() != long || b.MaxLease() != 1500*time.Microsecond || b.Channel() != long+".released" || len(b.Channel()) > 63 {
		t.Errorf("Schema, MaxLease, Channel = %q, %v, %q", b.Schema(), b.MaxLease(), b.Channel())
	}
}

// A backend from New leaves the pool to its caller: Close does not close it.
func TestNewKeepsThePool(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	pool := newPool(t, dsn, nil)
	b := newBackend(t, pool, admin)
	mustOpen(t, b, time.Second)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(testCtx(t)); err != nil {
		t.Errorf("the caller's pool after Backend.Close: %v; want it open", err)
	}
	if _, _, err := b.OpenSession(testCtx(t), backends.SessionOptions{TTL: time.Second}); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("OpenSession after Close = %v; want ErrClosed", err)
	}
	if _, err := b.Inspect(testCtx(t)); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("Inspect after Close = %v; want ErrClosed", err)
	}
	if err := b.Migrate(testCtx(t)); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("Migrate after Close = %v; want ErrClosed", err)
	}
}

// withParams adds query parameters to a URL.
func withParams(t *testing.T, dsn string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Open takes the backend's options from the URL's simba_ parameters (pgx
// never sees them), migrates, owns its pool and closes it.
func TestOpen(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	schema := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, schema) })
	b, err := Open(ctx, withParams(t, dsn, ParamSchema, schema, ParamMaxLease, "1500ms", ParamNotifications, "false",
		"application_name", "simba-open-test"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if b.Schema() != schema || b.MaxLease() != 1500*time.Millisecond || b.notify {
		t.Errorf("Open's backend: schema %q, MaxLease %v, notifications %v; want %q, 1.5s, false", b.Schema(), b.MaxLease(), b.notify, schema)
	}
	if got := b.pool.Config().ConnConfig.RuntimeParams; got["application_name"] != "simba-open-test" || len(got) != 1 {
		t.Errorf("the pool's run-time parameters = %v; want only application_name (simba_ parameters removed)", got)
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".meta").Scan(&exists); err != nil || !exists {
		t.Errorf("after Open the schema exists = %v, %v; want it migrated", exists, err)
	}
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pool := b.pool
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx); err == nil {
		t.Error("Open's pool still answers after Close; want it closed")
	}

	// Options override the URL.
	b, err = Open(ctx, withParams(t, dsn, ParamSchema, schema, ParamMigrate, "false"), WithMaxLease(2*time.Second))
	if err != nil {
		t.Fatalf("Open of an existing schema without migration: %v", err)
	}
	if b.MaxLease() != 2*time.Second || b.migrate {
		t.Errorf("MaxLease %v, migrate %v; want the option's 2s, and the URL's false", b.MaxLease(), b.migrate)
	}
	b.Close()
}

// A password with characters that a URL would need escaped means itself.
func TestParseURLPasswords(t *testing.T) {
	for _, pw := range []string{"s3c/ret", "s3c#ret", "s3c@ret", "s3c?ret", "a/b#c@d?e:f", "with space", "esc%2Faped"} {
		raw := "postgres://user:" + pw + "@db.example:5433/app?sslmode=disable&simba_schema=jobs"
		conn, o, err := parseURL(raw)
		if err != nil {
			t.Errorf("parseURL(%q): %v", raw, err)
			continue
		}
		cfg, err := pgxpool.ParseConfig(conn)
		if err != nil {
			t.Errorf("pgx parsing %q (from %q): %v", conn, raw, err)
			continue
		}
		want := pw
		if pw == "esc%2Faped" {
			want = "esc/aped"
		}
		c := cfg.ConnConfig
		if c.User != "user" || c.Password != want || c.Host != "db.example" || c.Port != 5433 || c.Database != "app" ||
			o.schema == nil || *o.schema != "jobs" {
			t.Errorf("%q: user %q, password %q, host %q:%d, database %q, schema %v; want user, %q, db.example:5433, app, jobs",
				raw, c.User, c.Password, c.Host, c.Port, c.Database, o.schema, want)
		}
	}
}

// §12: URLs that Open refuses, and credentials that never appear in the
// error, whatever characters the password holds.
func TestOpenErrors(t *testing.T) {
	dsn := sharedDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host, db := u.Host, strings.TrimPrefix(u.Path, "/")
	for _, c := range []struct{ url, want string }{
		{"mysql://u:s3cret@" + host + "/" + db, "postgres://"},
		{"postgres://u:s3cret@/" + db, "names no host"},
		{"postgres:///" + db, "names no host"},
		{"postgres://nosuchuser:s3c/ret@" + host + "/" + db, `role "nosuchuser" does not exist`},
		{"postgres://nosuchuser:s3c#ret@" + host + "/" + db, `role "nosuchuser" does not exist`},
		{"postgres://nosuchuser:s3c@ret@" + host + "/" + db, `role "nosuchuser" does not exist`},
		{"postgres://nosuchuser:s3c?ret@" + host + "/" + db, `role "nosuchuser" does not exist`},
		{"postgres://u:s3c%zzret@" + host + "/" + db, "does not parse"},
		{"postgres://u:s3cret@" + host + "/" + db + "#frag", "fragment"},
		{"postgres://u:s3cret@" + host + "/" + db + "?simba_max_lease=soon", "simba_max_lease"},
		{"postgres://u:s3cret@" + host + "/" + db + "?simba_migrate=maybe", "simba_migrate"},
		{"postgres://u:s3cret@" + host + "/" + db + "?simba_schema=Bad", "WithSchema"},
		{"postgres://u:s3cret@" + host + "/" + db + "?sslmode=sometimes", "sslmode"},
		{"postgres://u:s3cret@" + host + "/" + db + "?password=%zz", "does not parse"},
		{"postgres://u:s3cret@127.0.0.1:1/" + db, "unavailable"},
		{"postgresql://nosuchuser:s3cret@" + host + "/" + db, "unavailable"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		b, err := Open(ctx, c.url)
		cancel()
		if err == nil {
			b.Close()
			t.Errorf("Open(%s) = nil error; want one", c.url)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v; want an error mentioning %q", c.url, err, c.want)
		}
		for _, secret := range []string{"s3c", "ret@"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%s) error shows the password: %v", c.url, err)
			}
		}
	}
}

// S4: Close ends the session with its first call, and what the session
// held is free to others from then on; a session holding more than one
// call releases (1,000 leases) takes more calls, and when ctx ends before
// they are done, Close still returns nil — the session has ended, and other
// calls finish releasing its leases (here an acquire of one of them). The
// second call is held up here by a lock on the last lease's record.
func TestCloseEndedByItsFirstCall(t *testing.T) {
	t.Parallel()
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := mustOpen(t, b, time.Minute)
	const n = 1010
	for i := range n {
		if _, err := s.Acquire(ctx, fmt.Sprintf("l-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{b.Schema()}.Sanitize()+".leases WHERE name = $1 FOR UPDATE",
		fmt.Sprintf("l-%04d", n-1)); err != nil {
		t.Fatal(err)
	}
	closeCtx, closeCancel := context.WithTimeout(ctx, 2*time.Second)
	defer closeCancel()
	if err := s.Close(closeCtx); err != nil {
		t.Errorf("Close whose second call outlived its context = %v; want nil (its first call ended the session)", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	other := mustOpen(t, b, time.Minute)
	if _, err := other.Acquire(ctx, fmt.Sprintf("l-%04d", n-2)); err != nil {
		t.Errorf("Acquire of a lease the closed session still had on record: %v; want it free", err)
	}
}
