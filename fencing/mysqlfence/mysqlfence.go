// Package mysqlfence is the MySQL and MariaDB recipe for fenced writes (F3),
// as the seed writes it for JDBC: a table with one row per resource, created
// once, then written with one conditional UPDATE, so that the token check and
// the write are one atomic statement.
//
// Rule names such as F1 or §12 refer to docs/design.md in the repository.
//
// The table (see [Table.CreateTable]):
//
//	CREATE TABLE name (
//		id            VARBINARY(255) PRIMARY KEY,
//		fencing_token BIGINT NOT NULL DEFAULT 0,
//		value         LONGBLOB NULL
//	) ENGINE=InnoDB
//
// Once per resource, its row is inserted ([Table.Init]; [Table.Write] does it
// on a resource's first write):
//
//	INSERT IGNORE INTO name (id) VALUES (?)
//
// and a write is
//
//	UPDATE name SET value = ?, fencing_token = ? WHERE id = ? AND fencing_token <= ?
//
// One matched row means accepted, zero a stale holder. MySQL counts changed
// rows, not matched ones, unless the connection says CLIENT_FOUND_ROWS
// (go-sql-driver's clientFoundRows=true; Connector/J's default, which the
// seed's recipe relies on): a retry with the same token and value changes
// nothing and reports 0. The Table handles both settings: when the UPDATE
// reports no row, it reads the row, and a row already holding this very
// token and value is the retry's, accepted; anything else is stale. InnoDB's
// UPDATE locks the row and checks its WHERE against the latest committed
// version, so a stale token never lands after a newer one, whatever the
// isolation level.
//
// The same statement protects a row of your own table: add a fencing_token
// column and put "AND fencing_token <= ?" in the UPDATE's WHERE clause.
//
// The [DB] is the caller's (*sql.DB, *sql.Conn or *sql.Tx of
// go-sql-driver/mysql); this package never closes it. In a *sql.Tx, the
// write commits or rolls back with the transaction.
package mysqlfence

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

// DB is what the recipe needs of a connection; *sql.DB, *sql.Conn and
// *sql.Tx implement it.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Table writes fenced values to the rows of one table, one row per resource
// id. It is safe for concurrent use.
type Table struct {
	db           DB
	name         string // quoted with backticks, possibly database-qualified
	maxValueSize int

	update, insert, read string
}

// Option configures a [Table].
type Option func(*Table) error

// maxLongBlob is the largest LONGBLOB MySQL stores (4 GiB less one), capped
// at what max_allowed_packet could ever carry (1 GiB).
const maxLongBlob = 1 << 30

// maxID is the longest resource id, in bytes (the id column's width).
const maxID = 255

// WithMaxValueSize sets the largest value, in bytes, that [Table.Write]
// accepts (default [fencing.DefaultMaxValueSize]); larger values are refused
// with an error wrapping [fencing.ErrValueTooLarge] before any round trip.
func WithMaxValueSize(n int) Option {
	return func(t *Table) error {
		if n < 0 || n > maxLongBlob {
			return fmt.Errorf("mysqlfence: max value size %d: want 0 to %d bytes", n, maxLongBlob)
		}
		t.maxValueSize = n
		return nil
	}
}

// New returns the Table called table ("name" or "database.name", each part
// 1 to 64 characters of [A-Za-z0-9_$], not all digits), reached through db.
// It makes no call to the database: create the table with
// [Table.CreateTable] or by hand.
func New(db DB, table string, opts ...Option) (*Table, error) {
	if isNil(db) {
		return nil, errors.New("mysqlfence: nil DB: want a *sql.DB, *sql.Conn or *sql.Tx")
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("mysqlfence: table %q: want name or database.name", table)
	}
	quoted := make([]string, len(parts))
	for i, p := range parts {
		if !validIdentifier(p) {
			return nil, fmt.Errorf("mysqlfence: table %q: %q is not 1 to 64 characters of [A-Za-z0-9_$], not all digits", table, p)
		}
		quoted[i] = "`" + p + "`"
	}
	t := &Table{db: db, name: strings.Join(quoted, "."), maxValueSize: fencing.DefaultMaxValueSize}
	for _, opt := range opts {
		if err := opt(t); err != nil {
			return nil, err
		}
	}
	t.update = "UPDATE " + t.name + " SET value = ?, fencing_token = ? WHERE id = ? AND fencing_token <= ?"
	t.insert = "INSERT IGNORE INTO " + t.name + " (id) VALUES (?)"
	t.read = "SELECT value, value IS NULL, fencing_token FROM " + t.name + " WHERE id = ?"
	return t, nil
}

func isNil(db DB) bool {
	switch db := db.(type) {
	case nil:
		return true
	case *sql.DB:
		return db == nil
	case *sql.Conn:
		return db == nil
	case *sql.Tx:
		return db == nil
	}
	return false
}

func validIdentifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	digits := true
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '$') {
			return false
		}
		digits = digits && '0' <= c && c <= '9'
	}
	return !digits
}

// CreateTable creates the table if it does not exist, in InnoDB (its row
// locks make the conditional UPDATE atomic).
func (t *Table) CreateTable(ctx context.Context) error {
	_, err := t.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+t.name+` (
	id            VARBINARY(255) NOT NULL PRIMARY KEY,
	fencing_token BIGINT NOT NULL DEFAULT 0,
	value         LONGBLOB NULL
) ENGINE=InnoDB`)
	if err != nil {
		return fmt.Errorf("mysqlfence: create table %s: %w", t.name, err)
	}
	return nil
}

// Init inserts the row of resource id, once (INSERT IGNORE: a row that
// exists is left as it is). [Table.Write] calls it on a resource's first
// write; call it at deployment to spare that round trip.
func (t *Table) Init(ctx context.Context, id string) error {
	if err := t.checkID(id); err != nil {
		return err
	}
	if _, err := t.db.ExecContext(ctx, t.insert, []byte(id)); err != nil {
		return fmt.Errorf("mysqlfence: %s id %q: insert: %w", t.name, id, err)
	}
	return nil
}

// Write stores value for the resource id with token, if token is not lower
// than the highest token accepted for id (see the package documentation).
// It returns nil if the write was accepted; an error wrapping
// [fencing.ErrStaleToken] if it was rejected; [fencing.ErrInvalidToken] or
// [fencing.ErrValueTooLarge] for bad input, with no round trip; a database
// error otherwise. An accepted write that changes the row is one round trip;
// a rejected one, or a retry without clientFoundRows, two; the first write
// of a resource up to four.
func (t *Table) Write(ctx context.Context, id string, token backends.Token, value []byte) error {
	if err := t.check(id, token, value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // NULL is the row before its first write
	}
	ok, err := t.exec(ctx, id, token, value)
	if err != nil || ok {
		return err
	}
	// No row reported: stale; or a retry that changed nothing, without
	// clientFoundRows; or the resource has no row yet.
	got, highest, exists, err := t.row(ctx, id)
	switch {
	case err != nil:
		return err
	case !exists:
		if err := t.Init(ctx, id); err != nil {
			return err
		}
		if ok, err = t.exec(ctx, id, token, value); err != nil || ok {
			return err
		}
		if got, highest, _, err = t.row(ctx, id); err != nil {
			return err
		}
	}
	if highest == token && got != nil && bytes.Equal(got, value) {
		return nil // matched, and changed nothing: a retry of this write
	}
	return fmt.Errorf("mysqlfence: %s id %q: %w", t.name, id, fencing.StaleError(token, highest))
}

func (t *Table) checkID(id string) error {
	if t == nil {
		return errors.New("mysqlfence: nil *Table")
	}
	if id == "" || len(id) > maxID {
		return fmt.Errorf("mysqlfence: resource id %.40q: %d bytes; want 1 to %d", id, len(id), maxID)
	}
	return nil
}

func (t *Table) check(id string, token backends.Token, value []byte) error {
	if err := t.checkID(id); err != nil {
		return err
	}
	if err := fencing.CheckToken(token); err != nil {
		return fmt.Errorf("mysqlfence: %s id %q: %w", t.name, id, err)
	}
	if len(value) > t.maxValueSize {
		return fmt.Errorf("mysqlfence: %s id %q: %w: %d bytes; at most %d", t.name, id, fencing.ErrValueTooLarge, len(value), t.maxValueSize)
	}
	return nil
}

// exec runs the conditional UPDATE and reports whether it counted a row.
func (t *Table) exec(ctx context.Context, id string, token backends.Token, value []byte) (bool, error) {
	r, err := t.db.ExecContext(ctx, t.update, value, int64(token), []byte(id), int64(token))
	if err != nil {
		return false, fmt.Errorf("mysqlfence: %s id %q: %w", t.name, id, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mysqlfence: %s id %q: %w", t.name, id, err)
	}
	return n == 1, nil
}

// row reads the resource's row.
func (t *Table) row(ctx context.Context, id string) (value []byte, token backends.Token, exists bool, err error) {
	var (
		tok    int64
		isNull bool
	)
	err = t.db.QueryRowContext(ctx, t.read, []byte(id)).Scan(&value, &isNull, &tok)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("mysqlfence: %s id %q: read: %w", t.name, id, err)
	}
	if isNull {
		value = nil
	} else if value == nil {
		value = []byte{}
	}
	return value, backends.Token(tok), true, nil
}

// Read returns the value last accepted for id and its token, the highest
// token accepted for id; nil and 0 if id was never written. One round trip.
func (t *Table) Read(ctx context.Context, id string) ([]byte, backends.Token, error) {
	if err := t.checkID(id); err != nil {
		return nil, 0, err
	}
	value, token, _, err := t.row(ctx, id)
	if err != nil || token == 0 {
		return nil, 0, err
	}
	if value == nil {
		value = []byte{}
	}
	return value, token, nil
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
