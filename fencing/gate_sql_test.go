package fencing_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// pgSetup is a table of the test's own in the test database, and a
// connection pool that no gate guards, to look at it.
type pgSetup struct {
	table   string
	appName string          // the application_name of the gated connections
	config  *pgx.ConnConfig // for the gated connections
	plain   *sql.DB
}

// newPG creates the table (id int primary key) and drops it when the test
// ends; skipped on a bare machine, failed under make test when PostgreSQL
// is missing (internal/testkit/testservers).
func newPG(t *testing.T) *pgSetup {
	t.Helper()
	config, err := pgx.ParseConfig(testservers.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(rand.Text()[:10])
	s := &pgSetup{table: "gate_test_" + suffix, appName: "simba-gate-test-" + suffix}
	s.config = config.Copy()
	s.config.RuntimeParams["application_name"] = s.appName
	s.plain = sql.OpenDB(stdlib.GetConnector(*config))
	t.Cleanup(func() {
		_, _ = s.plain.Exec("DROP TABLE IF EXISTS " + s.table)
		_ = s.plain.Close()
	})
	if _, err := s.plain.ExecContext(t.Context(), "CREATE TABLE "+s.table+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return s
}

// open returns a database whose connections pass the gate, closed when the
// test ends.
func (s *pgSetup) open(t *testing.T, gate fencing.Gate) *sql.DB {
	t.Helper()
	db := sql.OpenDB(&fencing.Connector{Gate: gate, Base: stdlib.GetConnector(*s.config)})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// rows returns the ids in the table, as seen without the gate.
func (s *pgSetup) ids(t *testing.T) []int {
	t.Helper()
	rows, err := s.plain.QueryContext(t.Context(), "SELECT id FROM "+s.table+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// wantIDs fails t unless the table holds exactly want.
func (s *pgSetup) wantIDs(t *testing.T, want ...int) {
	t.Helper()
	got := s.ids(t)
	if len(got) != len(want) {
		t.Fatalf("the table holds %v; want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("the table holds %v; want %v", got, want)
		}
	}
}

// waitActive waits until a gated connection runs query on the server, as
// pg_stat_activity shows it.
func (s *pgSetup) waitActive(t *testing.T, query string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		var n int
		err := s.plain.QueryRowContext(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query = $2",
			s.appName, query).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%q is not running", query)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Writes pass while the term is valid and are refused once it ended;
// nothing refused reaches the table. Reads pass; the marks and read-only
// transactions decide what is a read.
func TestConnectorRefusesWritesAfterTheTermEnded(t *testing.T) {
	pg := newPG(t)
	c, term := lockTerm(t, "gate-sql-refuse")
	db := pg.open(t, fencing.Gate{Term: term, Min: 100 * time.Millisecond})
	ctx := t.Context()
	insert := "INSERT INTO " + pg.table + " VALUES ($1)"

	if _, err := db.ExecContext(ctx, insert, 1); err != nil {
		t.Fatalf("Exec while the term is valid: %v", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, insert, 2); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit while the term is valid: %v", err)
	}
	stmt, err := db.PrepareContext(ctx, insert)
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	if _, err := stmt.ExecContext(ctx, 3); err != nil {
		t.Fatalf("a prepared statement's Exec while the term is valid: %v", err)
	}
	pg.wantIDs(t, 1, 2, 3)

	unlock(t, c, term)
	_, err = db.ExecContext(ctx, insert, 4)
	wantGateError(t, err, "Exec", false, runtime.ReasonStopped)
	_, err = stmt.ExecContext(ctx, 5)
	wantGateError(t, err, "Exec", false, runtime.ReasonStopped)
	_, err = db.BeginTx(ctx, nil)
	wantGateError(t, err, "Begin", false, runtime.ReasonStopped)
	// INSERT … RETURNING through Query is a write only when marked so.
	var id int
	err = db.QueryRowContext(fencing.AsWrite(ctx), insert+" RETURNING id", 6).Scan(&id)
	wantGateError(t, err, "Query", false, runtime.ReasonStopped)
	pg.wantIDs(t, 1, 2, 3)

	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+pg.table).Scan(&n); err != nil || n != 3 {
		t.Fatalf("a read after the term ended = %d, %v; want 3, nil", n, err)
	}
	if _, err := db.ExecContext(fencing.AsRead(ctx), "SET statement_timeout = 0"); err != nil {
		t.Fatalf("an Exec marked AsRead after the term ended: %v", err)
	}
	ro, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("a read-only transaction after the term ended: %v", err)
	}
	if err := ro.QueryRowContext(ctx, "SELECT count(*) FROM "+pg.table).Scan(&n); err != nil || n != 3 {
		t.Fatalf("a read in a read-only transaction = %d, %v; want 3, nil", n, err)
	}
	if _, err := ro.ExecContext(fencing.AsRead(ctx), insert, 7); err == nil {
		t.Fatal("an INSERT in a read-only transaction passed; want PostgreSQL to refuse it")
	}
	_ = ro.Rollback()
	pg.wantIDs(t, 1, 2, 3)
}

// A statement running in a write transaction when the term ends is
// cancelled, the transaction does not commit, and later writes are
// refused.
func TestConnectorCancelsWritesInFlight(t *testing.T) {
	pg := newPG(t)
	e, term := electedTerm(t, "gate-sql-inflight")
	db := pg.open(t, fencing.Gate{Term: term})
	ctx := t.Context()
	insert := "INSERT INTO " + pg.table + " VALUES ($1)"

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, insert, 1); err != nil {
		t.Fatal(err)
	}
	const sleep = "SELECT pg_sleep(5)"
	done := make(chan error, 1)
	go func() { // a read, but in a transaction that writes: the gate sees it
		var v string
		done <- tx.QueryRowContext(ctx, sleep).Scan(&v)
	}()
	pg.waitActive(t, sleep)
	if err := e.StepDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	err = <-done
	wantGateError(t, err, "Query", true, runtime.ReasonSteppedDown)
	if err := tx.Commit(); err == nil {
		t.Fatal("the transaction committed after its statement was cancelled and its term ended")
	}
	pg.wantIDs(t) // the insert of the transaction did not land

	_, err = db.ExecContext(ctx, insert, 2)
	wantGateError(t, err, "Exec", false, runtime.ReasonSteppedDown)
	pg.wantIDs(t)
}

// A Query marked as a write whose term ends while its rows are read is
// cancelled: its rows stop with the gate's error.
func TestConnectorCancelsQueriesInFlight(t *testing.T) {
	pg := newPG(t)
	c, term := lockTerm(t, "gate-sql-query")
	db := pg.open(t, fencing.Gate{Term: term})
	ctx := t.Context()

	// Rows 1 and 2 come at once, row 4 after 5 s: the server sends its
	// output when its 8 KiB buffer fills, so rows 1 and 2 leave in full
	// while row 3, its tail still in the buffer, waits for row 4.
	const query = "SELECT CASE WHEN i < 4 THEN repeat('x', 10000) ELSE pg_sleep(5)::text END FROM generate_series(1, 4) i"
	rows, err := db.QueryContext(fencing.AsWrite(ctx), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no first row: %v", rows.Err())
	}
	pg.waitActive(t, query)
	unlock(t, c, term)
	for rows.Next() {
	}
	wantGateError(t, rows.Err(), "Query", true, runtime.ReasonStopped)
}

// A transaction whose term ended before it committed is rolled back, and
// the error says why.
func TestConnectorRefusesTheCommit(t *testing.T) {
	pg := newPG(t)
	c, term := lockTerm(t, "gate-sql-commit")
	db := pg.open(t, fencing.Gate{Term: term})
	ctx := t.Context()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+pg.table+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	unlock(t, c, term)
	wantGateError(t, tx.Commit(), "Commit", false, runtime.ReasonStopped)
	pg.wantIDs(t)
	// Reads go on (on a new connection: pgx closed the one whose rollback
	// it could not send with the transaction's cancelled context).
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("a read after the refused commit = %d, %v", one, err)
	}
}

// The connector says which field is missing, and is not taken for a
// closed gate.
func TestConnectorBadInput(t *testing.T) {
	_, term := lockTerm(t, "gate-sql-bad")
	for _, c := range []struct {
		conn *fencing.Connector
		want string
	}{
		{&fencing.Connector{Gate: fencing.Gate{Term: term}}, "Base is nil"},
		{&fencing.Connector{Base: stdlib.GetConnector(pgx.ConnConfig{})}, "Term is nil"},
	} {
		db := sql.OpenDB(c.conn)
		err := db.PingContext(context.Background())
		_ = db.Close()
		if err == nil || errors.Is(err, fencing.ErrGateClosed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Ping = %v; want an error containing %q, not ErrGateClosed", err, c.want)
		}
	}
}
