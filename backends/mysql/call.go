package simbamysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// MySQL and MariaDB error numbers the backend tells apart.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errNoSuchTable     = 1146 // ER_NO_SUCH_TABLE
	errNoSuchRoutine   = 1305 // ER_SP_DOES_NOT_EXIST
	errNoDatabase      = 1046 // ER_NO_DB_ERROR
	errTxInProgress    = 1568 // ER_CANT_CHANGE_TX_CHARACTERISTICS
	errTableAccess     = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errRoutineAccess   = 1370 // ER_PROCACCESS_DENIED_ERROR
	errDBAccess        = 1044 // ER_DBACCESS_DENIED_ERROR
)

// maxAttempts bounds the runs of one statement (see retryable): a
// deadlock's victim under heavy contention may lose again.
const maxAttempts = 5

// statements are the backend's SQL: each operation one CALL of a procedure,
// kept as its text up to the arguments ("CALL prefix_proc("), which
// callSQL completes.
type statements struct {
	open, keepAlive, owned, acquire, release, holder, putValue string
	join, leave, members, close, poll                          string
	version                                                    string
}

func newStatements(prefix string) statements {
	call := func(proc string) string { return "CALL " + prefix + "_" + proc + "(" }
	return statements{
		open:      call("open"),
		keepAlive: call("keep_alive"),
		owned:     call("owned"),
		acquire:   call("acquire"),
		release:   call("release"),
		holder:    call("holder"),
		putValue:  call("put_value"),
		join:      call("join"),
		leave:     call("leave"),
		members:   call("members"),
		close:     call("close"),
		poll:      call("poll"),
		version:   "SELECT version, routines FROM " + prefix + "_meta WHERE one = 1",
	}
}

// callSQL completes call, a statement's text up to its arguments, with
// args written as literals: NULL for nil, decimal integers, and every string
// and byte slice as a hexadecimal literal (X'…'), which no character set,
// SQL mode or byte of the argument can turn into anything but a binary
// string. The backend's calls are sent as one text query each (COM_QUERY):
// one round trip whatever the DSN's interpolateParams, and no server-side
// prepared statement — closing one (COM_STMT_CLOSE) is a write that
// go-sql-driver sends without a deadline unless the DSN sets writeTimeout,
// and that database/sql sends while it holds its pool's lock, so that a
// connection gone silent (a blackholed link) stopped the whole pool, and
// Backend.Close with it.
func callSQL(call string, args ...any) string {
	q := make([]byte, 0, len(call)+16+64*len(args))
	q = append(q, call...)
	for i, a := range args {
		if i > 0 {
			q = append(q, ", "...)
		}
		switch v := a.(type) {
		case nil:
			q = append(q, "NULL"...)
		case int64:
			q = strconv.AppendInt(q, v, 10)
		case string:
			q = appendHex(q, []byte(v))
		case []byte:
			if v == nil {
				q = append(q, "NULL"...)
			} else {
				q = appendHex(q, v)
			}
		default:
			panic(fmt.Sprintf("simbamysql: an argument of type %T", a)) // the backend's own calls only
		}
	}
	return string(append(q, ')'))
}

// appendHex appends b as a hexadecimal literal.
func appendHex(q, b []byte) []byte {
	q = append(q, "X'"...)
	q = hex.AppendEncode(q, b)
	return append(q, '\'')
}

// queryRow runs one call that replies with one row.
func (b *Backend) queryRow(ctx context.Context, call string, dest []any, args ...any) error {
	return scanRow(ctx, b.db, callSQL(call, args...), dest...)
}

// queryRows runs one call and calls each for every row.
func (b *Backend) queryRows(ctx context.Context, call string, each func(*sql.Rows) error, args ...any) error {
	rows, err := b.db.QueryContext(ctx, callSQL(call, args...))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return readToEnd(rows)
}

// queryer runs a query: a *sql.DB, or one of its connections (*sql.Conn).
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanRow runs query, which replies with one row (or none: sql.ErrNoRows),
// scans that row into dest and reads the reply to its end: what
// (*sql.DB).QueryRowContext does, but with every read bounded by ctx. There,
// what Scan leaves unread (a SELECT's end-of-rows packet, a CALL's closing OK
// packet) is read by Rows.Close after go-sql-driver stopped watching ctx, so
// that a link gone silent between the row and that packet — a dropped route,
// a partition — holds the call, and the pool's connection, for as long as
// TCP takes to give up, whatever ctx says (a blackholed keep-alive held its
// session past its deadline instead of failing at its timeout, in
// TestBlackholedConnection).
func scanRow(ctx context.Context, q queryer, query string, dest ...any) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return readToEnd(rows)
}

// readToEnd reads what rows still has to receive — its remaining rows and
// result sets, and a CALL's closing OK packet — while go-sql-driver still
// ends a read that waits when the query's context ends (it stops watching
// the context once the rows are closed, and Close reads the rest without a
// bound), and returns the first error.
func readToEnd(rows *sql.Rows) error {
	for {
		for rows.Next() {
		}
		if !rows.NextResultSet() {
			return rows.Err()
		}
	}
}

// call runs one operation's statement: once the tables are known to be there
// (creating or checking them on first use), and again — at most maxAttempts
// times in all, within ctx — when the statement failed in a way that left
// nothing done or that any operation may repeat (see retryable). what names
// the operation and name its lease or group ("" for none), for errors.
//
// A statement that finds the tables or procedures gone (a database that lost
// its data) means that the store no longer knows the session: the error wraps
// backends.ErrSessionExpired, and the next call creates them again (with the
// amnesia guard), unless they are now of a newer version.
func (b *Backend) call(ctx context.Context, what, name string, run func() error) error {
	if b.closed.Load() {
		return b.errorf(what, name, "%w", backends.ErrClosed)
	}
	for again := true; ; again = false {
		if err := b.ensureSchema(ctx); err != nil {
			return err
		}
		err := b.retry(ctx, what, name, run)
		if !missing(err) {
			return err
		}
		b.ready.Store(false)
		if _, cerr := b.checkVersion(ctx); cerr != nil && errors.Is(cerr, ErrSchema) {
			return cerr
		}
		if what == "open session" && again {
			continue // a new session in new tables is what the caller wants
		}
		return b.errorf(what, name, "the tables of prefix %s are gone (the database lost them): %w: %w",
			b.prefix, backends.ErrSessionExpired, err)
	}
}

// missing reports an error saying that a table or procedure does not exist.
func missing(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errNoSuchTable || me.Number == errNoSuchRoutine)
}

// retry runs fn up to maxAttempts times while it fails retryably, and maps
// its last error.
func (b *Backend) retry(ctx context.Context, what, name string, fn func() error) error {
	var err error
	for range maxAttempts {
		if err = fn(); err == nil || !retryable(ctx, err) {
			break
		}
	}
	if err == nil || missing(err) {
		return err // call decides what a missing table means
	}
	op := what
	if name != "" {
		op += " " + strconv.Quote(name)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errTxInProgress {
		err = fmt.Errorf("the connection has a transaction open (does the DSN set autocommit=0? the backend needs autocommit): %w", err)
	}
	return storeerr.Unavailable(ctx, "simbamysql", op, err)
}

// retryable reports whether a failed statement may run again at once: the
// server chose it as a deadlock's victim or its lock wait timed out (the
// procedure rolled its transaction back), or the connection broke while it
// ran — the outcome is then unknown, but every operation of the backend may
// run twice: each is idempotent for its session (a second acquire returns
// the same token, a second release or close does nothing).
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == errDeadlock || me.Number == errLockWaitTimeout
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// errorf formats an error of operation what on name: "simbamysql: what "name": …".
func (b *Backend) errorf(what, name, format string, a ...any) error {
	op := what
	if name != "" {
		op += " " + strconv.Quote(name)
	}
	return fmt.Errorf("simbamysql: "+op+": "+format, a...)
}
