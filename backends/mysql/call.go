package simbamysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
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

// statements are the backend's SQL, each one CALL of a procedure.
type statements struct {
	open, keepAlive, owned, acquire, release, holder, putValue string
	join, leave, members, close, poll                          string
	version                                                    string
}

func newStatements(prefix string) statements {
	call := func(proc string, n int) string {
		q := "CALL " + prefix + "_" + proc + "("
		for i := range n {
			if i > 0 {
				q += ", "
			}
			q += "?"
		}
		return q + ")"
	}
	return statements{
		open:      call("open", 3),
		keepAlive: call("keep_alive", 1),
		owned:     call("owned", 1),
		acquire:   call("acquire", 5),
		release:   call("release", 3),
		holder:    call("holder", 2),
		putValue:  call("put_value", 4),
		join:      call("join", 3),
		leave:     call("leave", 2),
		members:   call("members", 2),
		close:     call("close", 1),
		poll:      call("poll", 1),
		version:   "SELECT version, routines FROM " + prefix + "_meta WHERE one = 1",
	}
}

// stmtCache prepares each statement once per backend: database/sql then
// prepares it on each connection that runs it, once, so that a call is one
// round trip whatever the DSN's interpolateParams.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[query]; ok {
		return s, nil
	}
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	c.m[query] = s
	return s, nil
}

// forget drops the prepared statements (after the procedures were replaced or
// lost).
func (c *stmtCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.m {
		s.Close()
	}
	c.m = nil
}

func (c *stmtCache) close() { c.forget() }

// queryRow runs one prepared statement that replies with one row.
func (b *Backend) queryRow(ctx context.Context, query string, dest []any, args ...any) error {
	st, err := b.stmts.get(ctx, query)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// queryRows runs one prepared statement and calls each for every row.
func (b *Backend) queryRows(ctx context.Context, query string, each func(*sql.Rows) error, args ...any) error {
	st, err := b.stmts.get(ctx, query)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
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
		b.stmts.forget()
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
