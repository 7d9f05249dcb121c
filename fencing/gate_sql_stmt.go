package fencing

import (
	"context"
	"database/sql/driver"
	"io"
	"reflect"
	"sync"
)

// gatedStmt is a prepared statement on a gatedConn: each execution passes
// the gate as the same call on the connection would (see Connector: "What
// is a write"), the connection's transaction included.
//
// A statement whose driver implements only the deprecated
// driver.ColumnConverter gets database/sql's default argument conversion:
// the wrapper offers the driver's NamedValueChecker, if it has one, and
// nothing else.
type gatedStmt struct {
	conn *gatedConn
	stmt driver.Stmt
}

var (
	_ driver.Stmt              = (*gatedStmt)(nil)
	_ driver.StmtExecContext   = (*gatedStmt)(nil)
	_ driver.StmtQueryContext  = (*gatedStmt)(nil)
	_ driver.NamedValueChecker = (*gatedStmt)(nil)
)

// Close implements driver.Stmt.
func (s *gatedStmt) Close() error { return s.stmt.Close() }

// NumInput implements driver.Stmt.
func (s *gatedStmt) NumInput() int { return s.stmt.NumInput() }

// Exec implements driver.Stmt.
func (s *gatedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), valuesToNamed(args))
}

// Query implements driver.Stmt.
func (s *gatedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), valuesToNamed(args))
}

// ExecContext implements driver.StmtExecContext.
func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	run := func(ctx context.Context) (driver.Result, error) {
		if ec, ok := s.stmt.(driver.StmtExecContext); ok {
			return ec.ExecContext(ctx, args)
		}
		values, err := namedToValues(args)
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return s.stmt.Exec(values) // deprecated, and the only way for drivers without ExecContext
	}
	if !s.conn.gated(ctx, true) {
		return run(ctx)
	}
	return gatedCall(s.conn.gate, ctx, "Exec", run)
}

// QueryContext implements driver.StmtQueryContext.
func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	run := func(ctx context.Context) (driver.Rows, error) {
		if qc, ok := s.stmt.(driver.StmtQueryContext); ok {
			return qc.QueryContext(ctx, args)
		}
		values, err := namedToValues(args)
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return s.stmt.Query(values) // deprecated, and the only way for drivers without QueryContext
	}
	if !s.conn.gated(ctx, false) {
		return run(ctx)
	}
	return gatedQuery(s.conn.gate, ctx, run)
}

// CheckNamedValue implements driver.NamedValueChecker: the driver's
// statement checks arguments if it can, else the driver's connection, else
// database/sql's default conversion applies.
func (s *gatedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

// valuesToNamed gives positional arguments their ordinals.
func valuesToNamed(values []driver.Value) []driver.NamedValue {
	named := make([]driver.NamedValue, len(values))
	for i, v := range values {
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return named
}

// gatedRows are the rows of a query the gate saw: the query's context lives
// until they are closed, so that the term's end cancels the query while its
// rows are read, and a read it cut fails with a *GateError. Each optional
// interface of driver.Rows answers as the driver's rows do, or as
// database/sql assumes when they lack it.
type gatedRows struct {
	rows    driver.Rows
	gate    Gate
	ctx     context.Context
	release func()
	once    sync.Once
}

var (
	_ driver.Rows                           = (*gatedRows)(nil)
	_ driver.RowsNextResultSet              = (*gatedRows)(nil)
	_ driver.RowsColumnTypeScanType         = (*gatedRows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*gatedRows)(nil)
	_ driver.RowsColumnTypeLength           = (*gatedRows)(nil)
	_ driver.RowsColumnTypeNullable         = (*gatedRows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*gatedRows)(nil)
)

// Columns implements driver.Rows.
func (r *gatedRows) Columns() []string { return r.rows.Columns() }

// Close implements driver.Rows.
func (r *gatedRows) Close() error {
	err := r.rows.Close()
	r.once.Do(r.release)
	return err
}

// Next implements driver.Rows.
func (r *gatedRows) Next(dest []driver.Value) error {
	err := r.rows.Next(dest)
	if err == io.EOF {
		return err
	}
	return r.gate.inFlight(r.ctx, err)
}

// HasNextResultSet implements driver.RowsNextResultSet.
func (r *gatedRows) HasNextResultSet() bool {
	if n, ok := r.rows.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

// NextResultSet implements driver.RowsNextResultSet.
func (r *gatedRows) NextResultSet() error {
	if n, ok := r.rows.(driver.RowsNextResultSet); ok {
		err := n.NextResultSet()
		if err == io.EOF {
			return err
		}
		return r.gate.inFlight(r.ctx, err)
	}
	return io.EOF
}

// ColumnTypeScanType implements driver.RowsColumnTypeScanType.
func (r *gatedRows) ColumnTypeScanType(index int) reflect.Type {
	if t, ok := r.rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(index)
	}
	return reflect.TypeFor[any]()
}

// ColumnTypeDatabaseTypeName implements
// driver.RowsColumnTypeDatabaseTypeName.
func (r *gatedRows) ColumnTypeDatabaseTypeName(index int) string {
	if t, ok := r.rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(index)
	}
	return ""
}

// ColumnTypeLength implements driver.RowsColumnTypeLength.
func (r *gatedRows) ColumnTypeLength(index int) (int64, bool) {
	if t, ok := r.rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(index)
	}
	return 0, false
}

// ColumnTypeNullable implements driver.RowsColumnTypeNullable.
func (r *gatedRows) ColumnTypeNullable(index int) (nullable, ok bool) {
	if t, isT := r.rows.(driver.RowsColumnTypeNullable); isT {
		return t.ColumnTypeNullable(index)
	}
	return false, false
}

// ColumnTypePrecisionScale implements driver.RowsColumnTypePrecisionScale.
func (r *gatedRows) ColumnTypePrecisionScale(index int) (precision, scale int64, ok bool) {
	if t, isT := r.rows.(driver.RowsColumnTypePrecisionScale); isT {
		return t.ColumnTypePrecisionScale(index)
	}
	return 0, 0, false
}
