// Package pgfence is the PostgreSQL recipe for fenced writes (F3): a
// table with one row per resource, written with one conditional UPDATE, so
// that the token check and the write are one atomic statement.
//
// Rule names such as F1 or §12 refer to docs/design.md in the repository.
//
// The table (see [Table.CreateTable]):
//
//	CREATE TABLE name (
//		id            text   PRIMARY KEY,
//		fencing_token bigint NOT NULL CHECK (fencing_token > 0),
//		value         bytea  NOT NULL
//	)
//
// A write is
//
//	UPDATE name SET fencing_token = $2, value = $3
//	WHERE id = $1 AND fencing_token <= $2
//
// One row matched means accepted: PostgreSQL counts a matched row even when
// a retry writes the same token and value again (MySQL would not: it counts
// changed rows). Zero rows means stale, or that the resource has no row yet:
// the first write of a resource inserts its row with
// INSERT … ON CONFLICT (id) DO NOTHING and, if another writer inserted it
// first, runs the UPDATE again. Under PostgreSQL's default READ COMMITTED
// isolation an UPDATE that waits for a concurrent writer's row lock
// re-checks its WHERE clause against the row that writer committed, so a
// stale token never lands after a newer one.
//
// The same statement protects a row of your own table: add a fencing_token
// column and put "AND fencing_token <= $n" in the UPDATE's WHERE clause.
//
// The [DB] is the caller's (*pgxpool.Pool, *pgx.Conn or pgx.Tx); this
// package never closes it. In a pgx.Tx, the write commits or rolls back with
// the transaction.
package pgfence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

// DB is what the recipe needs of a connection; *pgxpool.Pool, *pgx.Conn and
// pgx.Tx implement it.
type DB interface {
	// Exec runs a statement that returns no rows, as pgx's Exec does.
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	// QueryRow runs a query that returns at most one row, as pgx's
	// QueryRow does.
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Table writes fenced values to the rows of one table, one row per resource
// id. It is safe for concurrent use.
type Table struct {
	db           DB
	name         string // quoted, possibly schema-qualified
	maxValueSize int

	update, insert, read string
}

// Option configures a [Table].
type Option func(*Table) error

// WithMaxValueSize sets the largest value, in bytes, that [Table.Write]
// accepts (default [fencing.DefaultMaxValueSize]); larger values are refused
// with an error wrapping [fencing.ErrValueTooLarge] before any round trip.
func WithMaxValueSize(n int) Option {
	return func(t *Table) error {
		if n < 0 || n > maxBytea {
			return fmt.Errorf("pgfence: max value size %d: want 0 to %d bytes", n, maxBytea)
		}
		t.maxValueSize = n
		return nil
	}
}

// isNil reports whether db is nil or one of pgx's pointer types holding nil,
// which would otherwise panic on the first write rather than fail here.
func isNil(db DB) bool {
	switch db := db.(type) {
	case nil:
		return true
	case *pgxpool.Pool:
		return db == nil
	case *pgx.Conn:
		return db == nil
	}
	return false
}

// maxBytea is the largest bytea PostgreSQL stores (1 GiB less the header).
const maxBytea = 1<<30 - 1

// New returns the Table called table ("name" or "schema.name", each part of
// [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes; case is kept, as if quoted),
// reached through db. It makes no call to the database: create the table with
// [Table.CreateTable] or by hand.
func New(db DB, table string, opts ...Option) (*Table, error) {
	if isNil(db) {
		return nil, errors.New("pgfence: nil DB: want a *pgxpool.Pool, *pgx.Conn or pgx.Tx")
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("pgfence: table %q: want name or schema.name", table)
	}
	for _, p := range parts {
		if !validIdentifier(p) {
			return nil, fmt.Errorf("pgfence: table %q: %q is not 1 to 63 characters of [A-Za-z0-9_] starting with a letter or _", table, p)
		}
	}
	t := &Table{db: db, name: pgx.Identifier(parts).Sanitize(), maxValueSize: fencing.DefaultMaxValueSize}
	for _, opt := range opts {
		if err := opt(t); err != nil {
			return nil, err
		}
	}
	t.update = "UPDATE " + t.name + " SET fencing_token = $2, value = $3 WHERE id = $1 AND fencing_token <= $2"
	t.insert = "INSERT INTO " + t.name + " (id, fencing_token, value) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"
	t.read = "SELECT value, fencing_token FROM " + t.name + " WHERE id = $1"
	return t, nil
}

func validIdentifier(s string) bool {
	if s == "" || len(s) > 63 || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// CreateTable creates the table if it does not exist. It is idempotent, but
// two sessions creating the same table at the same instant may fail with a
// unique violation on PostgreSQL's catalog; create it once, at deployment.
func (t *Table) CreateTable(ctx context.Context) error {
	_, err := t.db.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t.name+` (
	id            text   PRIMARY KEY,
	fencing_token bigint NOT NULL CHECK (fencing_token > 0),
	value         bytea  NOT NULL
)`)
	if err != nil {
		return fmt.Errorf("pgfence: create table %s: %w", t.name, err)
	}
	return nil
}

// Write stores value for the resource id with token, if token is not lower
// than the highest token accepted for id (see the package documentation).
// It returns nil if the write was accepted; an error wrapping
// [fencing.ErrStaleToken] if it was rejected; [fencing.ErrInvalidToken] or
// [fencing.ErrValueTooLarge] for bad input, with no round trip; a database
// error otherwise. An accepted write to an existing row is one round trip;
// the first write of a resource, and a rejected write, take up to three.
func (t *Table) Write(ctx context.Context, id string, token backends.Token, value []byte) error {
	if err := t.check(id, token, value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // the column is NOT NULL
	}
	ok, err := t.exec(ctx, t.update, id, token, value)
	if err != nil || ok {
		return err
	}
	// No row matched: stale, or the resource has no row yet.
	if ok, err = t.exec(ctx, t.insert, id, token, value); err != nil || ok {
		return err
	}
	// The row exists (perhaps inserted by a concurrent writer just now):
	// the UPDATE decides.
	if ok, err = t.exec(ctx, t.update, id, token, value); err != nil || ok {
		return err
	}
	return fmt.Errorf("pgfence: %s id %q: %w", t.name, id, fencing.StaleError(token, 0))
}

func (t *Table) check(id string, token backends.Token, value []byte) error {
	if t == nil {
		return errors.New("pgfence: nil *Table")
	}
	if id == "" || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return fmt.Errorf("pgfence: resource id %q: want a non-empty UTF-8 string without NUL", id)
	}
	if err := fencing.CheckToken(token); err != nil {
		return fmt.Errorf("pgfence: %s id %q: %w", t.name, id, err)
	}
	if len(value) > t.maxValueSize {
		return fmt.Errorf("pgfence: %s id %q: %w: %d bytes; at most %d", t.name, id, fencing.ErrValueTooLarge, len(value), t.maxValueSize)
	}
	return nil
}

// exec runs one write statement and reports whether it touched a row.
func (t *Table) exec(ctx context.Context, sql, id string, token backends.Token, value []byte) (bool, error) {
	tag, err := t.db.Exec(ctx, sql, id, int64(token), value)
	if err != nil {
		return false, fmt.Errorf("pgfence: %s id %q: %w", t.name, id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Read returns the value last accepted for id and its token, the highest
// token accepted for id; nil and 0 if id was never written. One round trip.
func (t *Table) Read(ctx context.Context, id string) ([]byte, backends.Token, error) {
	if t == nil {
		return nil, 0, errors.New("pgfence: nil *Table")
	}
	var (
		value []byte
		token int64
	)
	err := t.db.QueryRow(ctx, t.read, id).Scan(&value, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("pgfence: %s id %q: read: %w", t.name, id, err)
	}
	return value, backends.Token(token), nil
}

// Resource returns the resource id of the table as a [fencing.Resource].
func (t *Table) Resource(id string) fencing.Resource { return resource{t, id} }

type resource struct {
	t  *Table
	id string
}

func (r resource) Write(ctx context.Context, token backends.Token, value []byte) error {
	return r.t.Write(ctx, r.id, token, value)
}

func (r resource) Read(ctx context.Context) ([]byte, backends.Token, error) {
	return r.t.Read(ctx, r.id)
}
