package simbapg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// querier is what an operation runs its statement on: the pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// SQLSTATE codes the backend tells apart.
const (
	codeDeadlock      = "40P01" // deadlock_detected
	codeSerialization = "40001" // serialization_failure
	codeNoSchema      = "3F000" // invalid_schema_name
	codeNoFunction    = "42883" // undefined_function
	codeNoTable       = "42P01" // undefined_table
	codeNoPrivilege   = "42501" // insufficient_privilege
	codeNewerSchema   = "SMB01" // raised by schema.sql
	codeForeignSchema = "SMB02" // raised by schema.sql
)

// maxAttempts bounds the runs of one statement (see retryable).
const maxAttempts = 3

// call runs one operation's statement: once the schema is known to be there
// (creating or checking it on first use), and again — at most maxAttempts
// times in all, within ctx — when the statement failed in a way that left
// nothing done or that any operation may repeat (see retryable). what names
// the operation and name its lease or group ("" for none), for errors.
//
// A statement that finds the schema gone (dropped, or a database that lost
// its data) means that the store no longer knows the session: the error wraps
// backends.ErrSessionExpired, and the next call creates the schema again
// (with its amnesia guard), unless the schema is now of a newer version.
func (b *Backend) call(ctx context.Context, what, name string, run func(q querier) error) error {
	if b.closed.Load() {
		return b.errorf(what, name, "%w", backends.ErrClosed)
	}
	for again := true; ; again = false {
		if err := b.ensureSchema(ctx); err != nil {
			return err
		}
		err := b.retry(ctx, what, name, func() error { return run(b.pool) })
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != codeNoSchema && pe.Code != codeNoFunction && pe.Code != codeNoTable) {
			return err
		}
		b.ready.Store(false)
		if _, cerr := b.checkVersion(ctx); cerr != nil && errors.Is(cerr, ErrSchema) {
			return cerr
		}
		if what == "open session" && again {
			continue // a new session in a new schema is what the caller wants
		}
		return b.errorf(what, name, "schema %s is gone (the database lost it): %w: %w", b.schema, backends.ErrSessionExpired, err)
	}
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
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == codeNoSchema || pe.Code == codeNoFunction || pe.Code == codeNoTable) {
		return err // call decides
	}
	op := what
	if name != "" {
		op += " " + strconv.Quote(name)
	}
	return storeerr.Unavailable(ctx, "simbapg", op, err)
}

// retryable reports whether a failed statement may run again at once: pgx
// says nothing was sent (a connection the server had closed, found stale),
// the server chose it as a deadlock's victim or failed it for serialisation
// (the transaction rolled back), or the connection broke while the statement
// ran — the outcome is then unknown, but every operation of the backend may
// run twice: each is idempotent for its session (a second acquire returns
// the same token, a second release or close does nothing).
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == codeDeadlock || pe.Code == codeSerialization
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// errorf formats an error of operation what on name: "simbapg: what "name": …".
func (b *Backend) errorf(what, name, format string, a ...any) error {
	op := what
	if name != "" {
		op += " " + strconv.Quote(name)
	}
	return fmt.Errorf("simbapg: "+op+": "+format, a...)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
