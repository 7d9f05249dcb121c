package fencing_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/runtime"
)

// oldDriver is a database/sql driver with only the interfaces every driver
// has: a connection that prepares and begins, statements that execute with
// positional values. It records what reached it. It checks the gate's way
// down for such drivers: database/sql prepares each statement, and the
// gated statement passes the gate.
type oldDriver struct {
	mu  sync.Mutex
	log []string
}

func (d *oldDriver) record(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, s)
}

func (d *oldDriver) calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.log)
}

func (d *oldDriver) Open(string) (driver.Conn, error)             { return &oldConn{d: d}, nil }
func (d *oldDriver) Connect(context.Context) (driver.Conn, error) { return &oldConn{d: d}, nil }
func (d *oldDriver) Driver() driver.Driver                        { return d }

type oldConn struct{ d *oldDriver }

func (c *oldConn) Prepare(q string) (driver.Stmt, error) { return &oldStmt{d: c.d, q: q}, nil }
func (c *oldConn) Close() error                          { return nil }
func (c *oldConn) Begin() (driver.Tx, error)             { c.d.record("BEGIN"); return oldTx{c.d}, nil }

type oldTx struct{ d *oldDriver }

func (t oldTx) Commit() error   { t.d.record("COMMIT"); return nil }
func (t oldTx) Rollback() error { t.d.record("ROLLBACK"); return nil }

type oldStmt struct {
	d *oldDriver
	q string
}

func (s *oldStmt) Close() error  { return nil }
func (s *oldStmt) NumInput() int { return -1 }
func (s *oldStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.d.record(s.q)
	return driver.RowsAffected(1), nil
}
func (s *oldStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.d.record(s.q)
	return &oneRow{}, nil
}

type oneRow struct{ done bool }

func (r *oneRow) Columns() []string { return []string{"n"} }
func (r *oneRow) Close() error      { return nil }
func (r *oneRow) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = int64(1)
	return nil
}

func TestConnectorOnADriverWithoutContexts(t *testing.T) {
	d := new(oldDriver)
	c, term := lockTerm(t, "gate-sql-old")
	db := sql.OpenDB(&fencing.Connector{Gate: fencing.Gate{Term: term}, Base: d})
	defer db.Close()
	ctx := t.Context()

	if _, err := db.ExecContext(ctx, "write 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "write 2"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err == nil ||
		!strings.Contains(err.Error(), "does not support read-only transactions") {
		t.Errorf("a read-only transaction on a driver without BeginTx = %v; want an error saying it is not supported", err)
	}

	unlock(t, c, term)
	_, err = db.ExecContext(ctx, "write 3")
	wantGateError(t, err, "Exec", false, runtime.ReasonStopped)
	wantGateError(t, tx.Commit(), "Commit", false, runtime.ReasonStopped)
	var n int
	if err := db.QueryRowContext(ctx, "read 4").Scan(&n); err != nil || n != 1 {
		t.Fatalf("a read after the term ended = %d, %v; want 1, nil", n, err)
	}
	if _, err := db.ExecContext(fencing.AsRead(ctx), "marked read 5"); err != nil {
		t.Fatal(err)
	}
	err = db.QueryRowContext(fencing.AsWrite(ctx), "marked write 6").Scan(&n)
	wantGateError(t, err, "Query", false, runtime.ReasonStopped)

	want := []string{"write 1", "BEGIN", "write 2", "ROLLBACK", "read 4", "marked read 5"}
	if got := d.calls(); !slices.Equal(got, want) {
		t.Errorf("the driver saw %q; want %q", got, want)
	}
}
