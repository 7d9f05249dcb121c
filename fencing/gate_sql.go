package fencing

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
)

// Connector is a database/sql/driver.Connector that puts a [Gate] in front
// of the writes of another connector's connections: for sql.OpenDB.
//
//	db := sql.OpenDB(&fencing.Connector{
//		Gate: fencing.Gate{Term: term, Min: time.Second},
//		Base: stdlib.GetConnector(*config), // pgx; most drivers have one
//	})
//	defer db.Close()
//
// A write is refused once the term ended, or when it would not stay valid
// for Gate.Min, with an error matching [ErrGateClosed] that wraps the
// term's reason; nothing reaches the database. A write running when the term
// ends is cancelled: its context, as the driver sees it, is cancelled too.
// Its outcome is unknown (InFlight): a statement the server finished before
// the cancel arrived stays done, and a driver may close the connection.
//
// # What is a write
//
// SQL text is not parsed; the gate goes by the call and the transaction:
//
//   - Outside a transaction, ExecContext is a write and QueryContext a read.
//   - In a transaction begun read-only (sql.TxOptions{ReadOnly: true}),
//     every statement is a read: the database enforces it, so this is the
//     one sure way to mark reads.
//   - In any other transaction, every statement is a write, reads
//     included, and so is Commit; BeginTx itself is refused once the gate
//     is closed. Rollback always passes the gate (a driver that keeps
//     BeginTx's context, as pgx does, cannot send it once the term ended,
//     and closes the connection instead, which rolls back as well).
//   - A context marked with [AsRead] or [AsWrite] overrides the above for
//     one statement: mark a Query that writes (INSERT … RETURNING, a
//     function with side effects, SELECT … FOR UPDATE) as a write, and an
//     Exec that changes nothing as a read.
//
// The limits: an unmarked Query that writes, outside a transaction, passes
// the gate; a trigger or function writes whatever the statement calling it
// is taken for. Commit takes no context in database/sql/driver: a commit
// can be cancelled in flight only by a driver that keeps BeginTx's context
// for it, as pgx's stdlib does (the gate hands the driver a context joined
// with the term's end). And a COMMIT the server has received is beyond any
// gate: the resource's token check closes that window (F1, see [Gate]).
//
// Build one Connector, and one *sql.DB, per term, over a Base that the terms
// share, and close the DB when the term ends. Close closes Base if it has a
// Close method, as sql.DB.Close expects of a connector.
type Connector struct {
	// Gate is the term and the validity writes need. Required.
	Gate Gate

	// Base connects to the database. Required.
	Base driver.Connector
}

var _ driver.Connector = (*Connector)(nil)

// Connect implements driver.Connector: it connects with Base and wraps the
// connection in the gate.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := c.Gate.validate(); err != nil {
		return nil, err
	}
	if c.Base == nil {
		return nil, errors.New("simba: fencing.Connector: Base is nil; set it to the driver's connector")
	}
	conn, err := c.Base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gatedConn{gate: c.Gate, conn: conn}, nil
}

// Driver implements driver.Connector: it returns Base's driver, nil if Base
// is nil.
func (c *Connector) Driver() driver.Driver {
	if c.Base == nil {
		return nil
	}
	return c.Base.Driver()
}

// Close closes Base if it is an io.Closer; sql.DB.Close calls it.
func (c *Connector) Close() error {
	if cl, ok := c.Base.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// gatedConn is a connection whose writes pass the gate. database/sql uses a
// connection from one goroutine at a time, so its fields need no lock.
type gatedConn struct {
	gate Gate
	conn driver.Conn
	tx   *gatedTx // the open transaction, nil if none
}

var (
	_ driver.Conn               = (*gatedConn)(nil)
	_ driver.ConnPrepareContext = (*gatedConn)(nil)
	_ driver.ConnBeginTx        = (*gatedConn)(nil)
	_ driver.ExecerContext      = (*gatedConn)(nil)
	_ driver.QueryerContext     = (*gatedConn)(nil)
	_ driver.Pinger             = (*gatedConn)(nil)
	_ driver.SessionResetter    = (*gatedConn)(nil)
	_ driver.Validator          = (*gatedConn)(nil)
	_ driver.NamedValueChecker  = (*gatedConn)(nil)
)

// gated reports whether a statement is a write that the gate must see
// (see Connector: "What is a write").
func (c *gatedConn) gated(ctx context.Context, exec bool) bool {
	switch markOf(ctx) {
	case markedRead:
		return false
	case markedWrite:
		return true
	}
	if c.tx != nil {
		return c.tx.writes
	}
	return exec
}

// Prepare implements driver.Conn.
func (c *gatedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext implements driver.ConnPrepareContext. Preparing writes
// nothing; the statement's executions pass the gate.
func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		s   driver.Stmt
		err error
	)
	if pc, ok := c.conn.(driver.ConnPrepareContext); ok {
		s, err = pc.PrepareContext(ctx, query)
	} else {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err = c.conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &gatedStmt{conn: c, stmt: s}, nil
}

// Close implements driver.Conn.
func (c *gatedConn) Close() error {
	if c.tx != nil {
		c.tx.end()
	}
	return c.conn.Close()
}

// Begin implements driver.Conn.
func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements driver.ConnBeginTx: a transaction that is not
// read-only is refused once the gate is closed, and begun with a context
// joined with the term's end, which drivers that keep it (pgx) use for the
// commit.
func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx := &gatedTx{conn: c, writes: !opts.ReadOnly, release: func() {}}
	bctx := ctx
	if tx.writes {
		if err := c.gate.Check("Begin"); err != nil {
			return nil, err
		}
		bctx, tx.release = c.gate.join(ctx, "Commit")
		tx.ctx = bctx
	}
	inner, err := c.begin(bctx, opts)
	if err != nil {
		tx.release()
		return nil, c.gate.inFlightIf(tx.writes, bctx, err)
	}
	tx.tx = inner
	c.tx = tx
	return tx, nil
}

// begin begins a transaction on the driver's connection, as database/sql
// does for a connection without BeginTx.
func (c *gatedConn) begin(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	if opts.Isolation != 0 {
		return nil, errors.New("simba: fencing: the driver's connection does not support non-default isolation levels")
	}
	if opts.ReadOnly {
		return nil, errors.New("simba: fencing: the driver's connection does not support read-only transactions")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.conn.Begin() // deprecated, and the only way for drivers without BeginTx
}

// ExecContext implements driver.ExecerContext. It returns driver.ErrSkip
// when the driver's connection cannot execute directly; database/sql then
// prepares the statement, whose execution passes the gate.
func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	run := func(ctx context.Context) (driver.Result, error) {
		if ec, ok := c.conn.(driver.ExecerContext); ok {
			return ec.ExecContext(ctx, query, args)
		}
		if e, ok := c.conn.(driver.Execer); ok { // deprecated; database/sql falls back to it too
			values, err := namedToValues(args)
			if err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return e.Exec(query, values)
		}
		return nil, driver.ErrSkip
	}
	if !c.gated(ctx, true) {
		return run(ctx)
	}
	return gatedCall(c.gate, ctx, "Exec", run)
}

// QueryContext implements driver.QueryerContext, returning driver.ErrSkip
// as ExecContext does.
func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	run := func(ctx context.Context) (driver.Rows, error) {
		if qc, ok := c.conn.(driver.QueryerContext); ok {
			return qc.QueryContext(ctx, query, args)
		}
		if q, ok := c.conn.(driver.Queryer); ok { // deprecated; database/sql falls back to it too
			values, err := namedToValues(args)
			if err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return q.Query(query, values)
		}
		return nil, driver.ErrSkip
	}
	if !c.gated(ctx, false) {
		return run(ctx)
	}
	return gatedQuery(c.gate, ctx, run)
}

// Ping implements driver.Pinger.
func (c *gatedConn) Ping(ctx context.Context) error {
	if p, ok := c.conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// ResetSession implements driver.SessionResetter.
func (c *gatedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid implements driver.Validator.
func (c *gatedConn) IsValid() bool {
	if v, ok := c.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue implements driver.NamedValueChecker: the driver's
// connection checks arguments if it can, and database/sql's default
// conversion applies otherwise.
func (c *gatedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// gatedTx is a transaction on a gatedConn. A transaction that writes holds
// a context joined with the term's end until it commits or rolls back.
type gatedTx struct {
	conn    *gatedConn
	tx      driver.Tx
	writes  bool            // not read-only: its statements and commit pass the gate
	ctx     context.Context // the context it was begun with, if it writes
	release func()
}

// Commit implements driver.Tx. A transaction that writes commits only if
// the gate lets it; otherwise it is rolled back and the error says why.
func (t *gatedTx) Commit() error {
	defer t.end()
	if !t.writes {
		return t.tx.Commit()
	}
	if err := t.conn.gate.Check("Commit"); err != nil {
		_ = t.tx.Rollback()
		return err
	}
	return t.conn.gate.inFlight(t.ctx, t.tx.Commit())
}

// Rollback implements driver.Tx.
func (t *gatedTx) Rollback() error {
	defer t.end()
	return t.tx.Rollback()
}

// end detaches the transaction from its connection and releases its
// context.
func (t *gatedTx) end() {
	if t.conn.tx == t {
		t.conn.tx = nil
	}
	t.release()
	t.release = func() {}
}

// inFlightIf is inFlight for a call the gate saw, and err as it is for
// one it let pass.
func (g Gate) inFlightIf(gated bool, joined context.Context, err error) error {
	if !gated {
		return err
	}
	return g.inFlight(joined, err)
}

// gatedCall runs a write that returns when it is over (an Exec): checked by
// the gate, with a context joined with the term's end.
func gatedCall[R any](g Gate, ctx context.Context, op string, run func(context.Context) (R, error)) (R, error) {
	var res R
	err := g.Do(ctx, op, func(ctx context.Context) error {
		var err error
		res, err = run(ctx)
		return err
	})
	return res, err
}

// gatedQuery runs a query the gate must see: checked, with a context joined
// with the term's end that lives until its rows are closed.
func gatedQuery(g Gate, ctx context.Context, run func(context.Context) (driver.Rows, error)) (driver.Rows, error) {
	if err := g.Check("Query"); err != nil {
		return nil, err
	}
	qctx, release := g.join(ctx, "Query")
	rows, err := run(qctx)
	if err != nil {
		release()
		return nil, g.inFlight(qctx, err)
	}
	return &gatedRows{rows: rows, gate: g, ctx: qctx, release: release}, nil
}

// namedToValues converts arguments for the drivers' old interfaces, which
// take no names, as database/sql does.
func namedToValues(named []driver.NamedValue) ([]driver.Value, error) {
	values := make([]driver.Value, len(named))
	for i, nv := range named {
		if nv.Name != "" {
			return nil, errors.New("simba: fencing: the driver does not support named parameters")
		}
		values[i] = nv.Value
	}
	return values, nil
}
