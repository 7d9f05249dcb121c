package simbapg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// §15: the migration creates the schema once and records its guard: no
// lease until MaxLease after the creation, tokens above the clock in µs at
// the creation; running it again changes nothing.
func TestMigrateCreatesOnce(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	const maxLease = 500 * time.Millisecond
	b := guardedBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(maxLease))
	var created time.Time
	if err := admin.QueryRow(ctx, "SELECT created_at FROM "+ident(b.Schema())+".meta").Scan(&created); err != nil {
		t.Fatal(err)
	}
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var rows int
	var again time.Time
	if err := admin.QueryRow(ctx, "SELECT count(*), max(created_at) FROM "+ident(b.Schema())+".meta").Scan(&rows, &again); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || !again.Equal(created) {
		t.Errorf("after a second migration: %d meta rows created at %v; want the one created at %v", rows, again, created)
	}

	s := mustOpen(t, b, time.Minute)
	_, err := s.Acquire(ctx, "lease")
	if !errors.Is(err, backends.ErrRecovering) || !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire right after the schema was created = %v; want ErrRecovering and ErrLeaseHeld (§15)", err)
	}
	var g backends.Grant
	waitFor(t, maxLease+5*time.Second, "a grant after the guard", func() bool {
		g, err = s.Acquire(ctx, "lease")
		return err == nil
	})
	var now time.Time
	if err := admin.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	if now.Before(created.Add(maxLease)) {
		t.Errorf("granted at %v, before the guard's end %v", now, created.Add(maxLease))
	}
	if min := created.UnixMicro(); int64(g.Token) < min {
		t.Errorf("first token %d; want at least the creation time in µs, %d (§15)", g.Token, min)
	}
}

// Two processes migrating one schema at once wait for each other (an
// advisory lock): both succeed, and the schema is created once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	schema := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, schema) })
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		b, err := New(newPool(t, dsn, nil), WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		wg.Go(func() {
			<-start
			errs[i] = b.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	var rows int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+ident(schema)+".meta").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d meta rows; want 1", rows)
	}
}

// A schema of a newer version, and a schema that holds other things, are
// refused with ErrSchema; an empty schema that a DBA created is used.
func TestMigrateRefuses(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)

	newer := newBackend(t, newPool(t, dsn, nil), admin)
	mustExec(t, admin, "UPDATE "+ident(newer.Schema())+".meta SET version = 2")
	for _, opts := range [][]Option{nil, {WithoutMigration()}} {
		b := sameSchema(t, newer, newPool(t, dsn, nil), opts...)
		_, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "version 2") {
			t.Errorf("OpenSession on a schema of version 2 = %v; want ErrSchema naming the version", err)
		}
		if err := b.Migrate(ctx); !errors.Is(err, ErrSchema) {
			t.Errorf("Migrate of a schema of version 2 = %v; want ErrSchema", err)
		}
	}

	foreign := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, foreign) })
	mustExec(t, admin, "CREATE SCHEMA "+ident(foreign))
	mustExec(t, admin, "CREATE TABLE "+ident(foreign)+".orders (id int)")
	b, err := New(newPool(t, dsn, nil), WithSchema(foreign))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "other objects") {
		t.Errorf("Migrate into a schema holding a table = %v; want ErrSchema saying it holds other objects", err)
	}
	var tables int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", foreign).Scan(&tables); err != nil || tables != 1 {
		t.Errorf("the foreign schema has %d tables (%v) after the refused migration; want its 1", tables, err)
	}

	empty := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, empty) })
	mustExec(t, admin, "CREATE SCHEMA "+ident(empty))
	b2, err := New(newPool(t, dsn, nil), WithSchema(empty))
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if err := b2.Migrate(ctx); err != nil {
		t.Errorf("Migrate into an empty schema a DBA created: %v", err)
	}
}

// A role without the rights to create the schema gets an error that names
// the privilege it lacks and the SQL file to run instead; once a DBA ran it
// (with psql, as the file says) and granted USAGE, the role uses the schema,
// with WithoutMigration or without, and with functions of an older revision,
// which it may not replace.
func TestMigrateUnprivileged(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	role := uniqueSchema() // a fresh name of the same form
	mustExec(t, admin, "CREATE ROLE "+ident(role)+" LOGIN")
	t.Cleanup(func() { mustExec(t, admin, "DROP ROLE IF EXISTS "+ident(role)) })
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var db string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}

	schema := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, schema) })
	b, err := New(pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, _, err = b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err == nil {
		t.Fatal("OpenSession by a role that may not create schemas = nil; want an error")
	}
	msg := err.Error()
	t.Logf("the error: %v", err)
	for _, want := range []string{"CREATE privilege on database " + ident(db), "schema.sql", "psql -1 -v schema=" + schema,
		"GRANT CREATE ON DATABASE", "GRANT USAGE ON SCHEMA " + ident(schema) + " TO " + ident(role), "WithoutMigration", "42501"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q", want)
		}
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil || exists {
		t.Fatalf("schema exists = %v, %v after the refused migration; want it missing", exists, err)
	}

	// The DBA runs the file with psql, and grants its use.
	runPsql(t, dsn, "-1", "-v", "schema="+schema, "-f", "schema.sql")
	mustExec(t, admin, "GRANT USAGE ON SCHEMA "+ident(schema)+" TO "+ident(role))
	endGuard(t, admin, schema)

	for _, opts := range [][]Option{{WithSchema(schema), WithoutMigration()}, {WithSchema(schema)}} {
		b, err := New(pool, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		s := mustOpen(t, b, time.Minute)
		g, err := s.Acquire(ctx, "lease")
		if err != nil {
			t.Fatalf("Acquire by the role: %v", err)
		}
		if err := s.PutValue(ctx, "lease", g.Token, []byte("v")); err != nil {
			t.Fatalf("PutValue by the role: %v", err)
		}
		if inv, err := b.Inspect(ctx); err != nil || len(inv.Leases) != 1 {
			t.Fatalf("Inspect by the role = %+v, %v; want the lease", inv, err)
		}
		if _, err := s.Release(ctx, "lease", g.Token); err != nil {
			t.Fatalf("Release by the role: %v", err)
		}
	}
	// Functions of an older revision (no comment, as revision 1 left
	// them), which the role may not replace: it warns, and uses them.
	mustExec(t, admin, "COMMENT ON TABLE "+ident(schema)+".meta IS NULL")
	logs := &logtext.Buffer{}
	old, err := New(pool, WithSchema(schema), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := mustOpen(t, old, time.Minute).Acquire(ctx, "other"); err != nil {
		t.Errorf("Acquire by the role through functions it may not replace: %v", err)
	}
	if !strings.Contains(logs.String(), "may not replace them") {
		t.Errorf("no warning that the role may not replace the functions of an older revision; logs:\n%s", logs)
	}
	// The tables stay the owner's: the role reaches them only through the
	// functions.
	var n int
	err = pool.QueryRow(ctx, "SELECT count(*) FROM "+ident(schema)+".leases").Scan(&n)
	if err == nil || !strings.Contains(err.Error(), "42501") {
		t.Errorf("the role reading the leases table directly = %d, %v; want permission denied", n, err)
	}
}

// Under WithoutMigration a missing schema is an error that names the file
// to run, and nothing is created.
func TestWithoutMigrationMissingSchema(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	schema := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, schema) })
	b, err := New(newPool(t, dsn, nil), WithSchema(schema), WithoutMigration())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, _, err = b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err == nil || !strings.Contains(err.Error(), "schema.sql") || !strings.Contains(err.Error(), "no Simba schema") {
		t.Errorf("OpenSession without the schema = %v; want an error naming schema.sql", err)
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil || exists {
		t.Errorf("schema exists = %v, %v; want it never created under WithoutMigration", exists, err)
	}
}

// The embedded file is a psql script that psql runs as the package
// documentation says, twice without harm; SchemaSQL is the same SQL for
// other tools.
func TestSchemaFile(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	onDisk, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != schemaFile {
		t.Fatal("the embedded schema differs from schema.sql")
	}
	viaPsql := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, viaPsql) })
	for range 2 {
		runPsql(t, dsn, "-1", "-v", "schema="+viaPsql, "-f", "schema.sql")
	}
	sql, err := SchemaSQL(uniqueSchema())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sql, `\if`) || strings.Contains(sql, ":'schema'") || strings.Contains(sql, `:"schema"`) {
		t.Error("SchemaSQL left psql's variables or commands in")
	}
	viaSQL := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, viaSQL) })
	sql, _ = SchemaSQL(viaSQL)
	if err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err }); err != nil {
		t.Fatalf("running SchemaSQL: %v", err)
	}
	// Both are what the backend itself creates: it finds them current.
	for _, schema := range []string{viaPsql, viaSQL} {
		b, err := New(newPool(t, dsn, nil), WithSchema(schema), WithoutMigration())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		mustOpen(t, b, time.Second)
	}
	if _, err := SchemaSQL("Bad-Name"); err == nil {
		t.Error("SchemaSQL(Bad-Name) = nil error")
	}
}

// S3, §15: a schema dropped under running sessions (an operator's DROP, a
// database restored without it) ends them: their calls fail with
// ErrSessionExpired, and the next session creates the schema again, whose
// guard then holds grants back.
func TestSchemaDroppedUnderSessions(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
	s := mustOpen(t, b, time.Minute)
	g, err := s.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	dropSchema(t, admin, b.Schema())
	if _, err := s.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive after the schema was dropped = %v; want ErrSessionExpired", err)
	}
	if _, err := s.Release(ctx, "lease", g.Token); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("Release after the schema was dropped = %v; want ErrSessionExpired", err)
	}
	s2 := mustOpen(t, b, time.Minute)
	if _, err := s2.Acquire(ctx, "lease"); !errors.Is(err, backends.ErrRecovering) {
		t.Errorf("Acquire in the schema created again = %v; want ErrRecovering (§15)", err)
	}
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// runPsql runs psql on dsn in the package directory.
func runPsql(t *testing.T, dsn string, args ...string) {
	t.Helper()
	if out, err := psql(t, dsn, args...); err != nil {
		t.Fatalf("psql %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// psql runs psql on dsn in the package directory, and returns what it
// printed.
func psql(t *testing.T, dsn string, args ...string) (string, error) {
	t.Helper()
	psql := testservers.PostgresProgram(t, "psql")
	cmd := exec.Command(psql, append([]string{"-X", "-q", "-w", "-v", "ON_ERROR_STOP=1", dsn}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// §15: the guard started by hand (start_guard, after a restore the schema
// cannot see) ends every session, grants nothing for MaxLease, keeps the
// values, and continues the tokens above those before.
func TestStartGuardByHand(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	const maxLease = time.Second
	b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(maxLease))
	a := mustOpen(t, b, maxLease)
	g, err := a.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutValue(ctx, "lease", g.Token, []byte("slot 9")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustExec(t, admin, "SELECT "+ident(b.Schema())+".start_guard()")
	if _, err := a.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive after start_guard = %v; want ErrSessionExpired", err)
	}
	c := mustOpen(t, b, maxLease)
	if _, err := c.Acquire(ctx, "lease"); !errors.Is(err, backends.ErrRecovering) {
		t.Errorf("Acquire after start_guard = %v; want ErrRecovering", err)
	}
	var g2 backends.Grant
	waitFor(t, maxLease+5*time.Second, "a grant after the guard", func() bool {
		if _, err := c.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
		g2, err = c.Acquire(ctx, "lease")
		return err == nil
	})
	if took := time.Since(start); took < maxLease {
		t.Errorf("granted %v after start_guard; want no grant before MaxLease %v", took, maxLease)
	}
	if g2.Token <= g.Token || string(g2.Value) != "slot 9" {
		t.Errorf("after the guard: token %d, value %q; want > %d and the value kept", g2.Token, g2.Value, g.Token)
	}
	// The role that uses the schema may not start it.
	var public bool
	if err := admin.QueryRow(ctx, "SELECT has_function_privilege('public', $1, 'EXECUTE')", b.Schema()+".start_guard()").Scan(&public); err != nil || public {
		t.Errorf("PUBLIC may execute start_guard: %v, %v; want not", public, err)
	}
}

// A schema whose functions the previous release created (revision 1:
// testdata/schema_revision1.sql is the schema.sql it shipped) works with this
// package as it is, and its first migration replaces the functions by this
// package's, keeping the tables and what they hold: sessions opened before go
// on. Code of either release works with the other's functions (their
// signatures do not change). Under WithoutMigration nothing is replaced, and
// a warning says how to; a newer revision is left alone, and the file refuses
// to replace it.
func TestMigrateUpgradesFunctions(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	ctx := testCtx(t)
	schema := uniqueSchema()
	t.Cleanup(func() { dropSchema(t, admin, schema) })
	runPsql(t, dsn, "-1", "-v", "schema="+schema, "-f", "testdata/schema_revision1.sql")
	endGuard(t, admin, schema)
	const signature = ".acquire(text, text, text, integer, interval, boolean)"
	body := func(schema string) string {
		t.Helper()
		var src string
		if err := admin.QueryRow(ctx, "SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1)", ident(schema)+signature).Scan(&src); err != nil {
			t.Fatal(err)
		}
		return src
	}
	comment := func() string {
		t.Helper()
		var c *string
		if err := admin.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", ident(schema)+".meta").Scan(&c); err != nil {
			t.Fatal(err)
		}
		return deref(c)
	}
	old := body(schema)
	current := body(newBackend(t, newPool(t, dsn, nil), admin).Schema())
	if old == current {
		t.Fatal("testdata/schema_revision1.sql has the functions of schema.sql; the test tests nothing")
	}

	logs := &logtext.Buffer{}
	fixed, err := New(newPool(t, dsn, nil), WithSchema(schema), WithoutMigration(), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	a := mustOpen(t, fixed, time.Minute)
	g, err := a.Acquire(ctx, "lease")
	if err != nil {
		t.Fatalf("Acquire through the functions of revision 1: %v", err)
	}
	if body(schema) != old {
		t.Error("the functions were replaced under WithoutMigration")
	}
	if !strings.Contains(logs.String(), "older revision") {
		t.Errorf("no warning under WithoutMigration about the functions' older revision; logs:\n%s", logs)
	}

	logs = &logtext.Buffer{}
	b, err := New(newPool(t, dsn, nil), WithSchema(schema), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := mustOpen(t, b, time.Minute)
	if got := body(schema); got != current {
		t.Errorf("after the migration, acquire is\n%s\nwant this package's\n%s", got, current)
	}
	if c := comment(); c != fmt.Sprintf("functions revision %d", functionsRevision) {
		t.Errorf("meta's comment after the migration = %q; want revision %d", c, functionsRevision)
	}
	if !strings.Contains(logs.String(), "replaced the schema's functions") {
		t.Errorf("the migration did not log the replacement; logs:\n%s", logs)
	}
	// The session opened before goes on with what it held.
	var held *backends.HeldError
	if _, err := s.Acquire(ctx, "lease"); !errors.As(err, &held) || held.Holder.Session != a.ID() {
		t.Errorf("Acquire of the lease held since before the migration = %v; want a HeldError naming %s", err, a.ID())
	}
	if d, err := a.Release(ctx, "lease", g.Token); err != nil || d.Leases != 0 || d.Version != 2 {
		t.Errorf("Release after the migration = %+v, %v; want no lease and version 2", d, err)
	}
	if _, err := s.Acquire(ctx, "lease"); err != nil {
		t.Errorf("Acquire after the release: %v", err)
	}

	mustExec(t, admin, "COMMENT ON TABLE "+ident(schema)+".meta IS 'functions revision 99'")
	mustExec(t, admin, "CREATE OR REPLACE FUNCTION "+ident(schema)+".us(i interval) RETURNS bigint LANGUAGE sql IMMUTABLE RETURN 99")
	newer, err := New(newPool(t, dsn, nil), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if err := newer.Migrate(ctx); err != nil {
		t.Errorf("Migrate of a schema with functions of a newer revision: %v", err)
	}
	var us int64
	if err := admin.QueryRow(ctx, "SELECT "+ident(schema)+".us('1 second')").Scan(&us); err != nil || us != 99 {
		t.Errorf("the newer revision's us() = %d, %v after Migrate; want it left alone (99)", us, err)
	}
	if out, err := psql(t, dsn, "-1", "-v", "schema="+schema, "-f", "schema.sql"); err == nil || !strings.Contains(out, "newer revision") {
		t.Errorf("psql running schema.sql on functions of a newer revision = %v:\n%s\nwant it refused", err, out)
	}
}
