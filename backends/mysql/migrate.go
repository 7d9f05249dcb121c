package simbamysql

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// schemaFile is schema.sql: a script for the mysql client (DELIMITER lines
// included), with every name prefixed simba_.
//
//go:embed schema.sql
var schemaFile string

// SchemaVersion is the version of the tables this package creates and uses.
// It is recorded in the prefix's meta table; tables of a newer version are
// refused with an error wrapping [ErrSchema].
const SchemaVersion = 1

// routinesRevision is the revision of the procedures of schema.sql, recorded
// in the meta table's routines column. Revisions change only the procedures'
// bodies: the tables and the procedures' signatures are those of
// SchemaVersion, so that code of every revision works with the procedures of
// every other, and a migration replaces the procedures of an older revision.
const routinesRevision = 4

// schemaFileName is where a DBA finds the SQL, for error messages.
const schemaFileName = "schema.sql of github.com/simba-go/simba/backends/mysql"

// tableNames are the suffixes of the backend's tables.
var tableNames = []string{"meta", "seq", "sessions", "leases", "groups", "members"}

// SchemaSQL returns the SQL that creates the tables and procedures of the
// given prefix at [SchemaVersion] (or replaces the procedures of existing
// ones): schema.sql, shipped with this package, with its prefix replaced, as
// a script for the mysql client (it changes the delimiter for the procedures'
// bodies):
//
//	mysql app < schema.sql
func SchemaSQL(prefix string) (string, error) {
	if err := validPrefix(prefix); err != nil {
		return "", err
	}
	return strings.ReplaceAll(schemaFile, "simba_", prefix+"_"), nil
}

// schemaStatements splits the prefix's schema.sql into statements, as the
// mysql client does: at the delimiter (";", or what a DELIMITER line sets)
// that ends a line; full-line comments are dropped. On MariaDB, procedures
// are replaced in one step (CREATE OR REPLACE), so that calls running
// meanwhile never find them missing.
func schemaStatements(prefix string, mariadb bool) []string {
	src, _ := SchemaSQL(prefix)
	var (
		out   []string
		cur   strings.Builder
		delim = ";"
	)
	for line := range strings.Lines(src) {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "--") || trimmed == "" && cur.Len() == 0:
			continue
		case strings.HasPrefix(trimmed, "DELIMITER "):
			delim = strings.TrimSpace(strings.TrimPrefix(trimmed, "DELIMITER "))
			continue
		}
		if stmt, ok := strings.CutSuffix(trimmed, delim); ok && !strings.Contains(trimmed, "--") {
			cur.WriteString(stmt)
			s := strings.TrimSpace(cur.String())
			cur.Reset()
			if mariadb {
				if strings.HasPrefix(s, "DROP PROCEDURE IF EXISTS ") || strings.HasPrefix(s, "DROP FUNCTION IF EXISTS ") {
					continue
				}
				s = strings.Replace(s, "CREATE PROCEDURE ", "CREATE OR REPLACE PROCEDURE ", 1)
				s = strings.Replace(s, "CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", 1)
			}
			out = append(out, s)
			continue
		}
		cur.WriteString(line)
	}
	return out
}

// Migrate creates the backend's tables and procedures if they are missing, or
// checks that they are at [SchemaVersion] and in InnoDB: tables of a newer
// version, tables with the prefix that are not Simba's, or tables in another
// engine are refused with an error wrapping [ErrSchema]. Procedures of an
// older revision are replaced by this package's (same tables, same
// signatures, so that processes running the older release go on working).
// Two processes migrating at once wait for each other (GET_LOCK, where the
// server allows it).
//
// The backend migrates by itself on first use, unless it was opened with
// [WithoutMigration]; calling Migrate is a way to do it, and fail, up front.
// Tables that are created start the amnesia guard (see the package
// documentation): no lease is granted until MaxLease has passed.
func (b *Backend) Migrate(ctx context.Context) error {
	if b.closed.Load() {
		return b.errorf("migrate", b.prefix, "%w", backends.ErrClosed)
	}
	if b.readOnly {
		return b.errorf("migrate", b.prefix, "the backend was opened read-only (WithReadOnly)")
	}
	if err := b.lockSchema(ctx); err != nil {
		return err
	}
	defer b.unlockSchema()
	if err := b.migrateNow(ctx); err != nil {
		return err
	}
	b.ready.Store(true)
	return nil
}

// ensureSchema makes sure, once, that the tables are there: it migrates, or
// under WithoutMigration checks the version.
func (b *Backend) ensureSchema(ctx context.Context) error {
	if b.ready.Load() {
		return nil
	}
	if err := b.lockSchema(ctx); err != nil {
		return err
	}
	defer b.unlockSchema()
	if b.ready.Load() {
		return nil
	}
	var err error
	if b.migrate {
		err = b.migrateNow(ctx)
	} else {
		var rev int
		if rev, err = b.checkVersion(ctx); err == nil && rev < routinesRevision && !b.readOnly {
			b.logger.Warn("simbamysql: the procedures are of an older revision; they work, "+
				"but run "+schemaFileName+" (or SchemaSQL) to install the new ones",
				slog.String("prefix", b.prefix), slog.Int("revision", rev), slog.Int("package revision", routinesRevision))
		}
	}
	if err == nil {
		b.ready.Store(true)
	}
	return err
}

func (b *Backend) lockSchema(ctx context.Context) error {
	select {
	case b.migrating <- struct{}{}:
		return nil
	case <-ctx.Done():
		return storeerr.Unavailable(ctx, "simbamysql", fmt.Sprintf("check tables %q", b.prefix), ctx.Err())
	}
}

func (b *Backend) unlockSchema() { <-b.migrating }

// checkVersion reads the tables' version and the procedures' revision: the
// error is nil if the version is SchemaVersion. Missing tables give an error
// for which missing reports true, wrapping ErrNoSchema.
func (b *Backend) checkVersion(ctx context.Context) (revision int, err error) {
	const what = "check tables"
	var v, rev int
	err = b.retry(ctx, what, b.prefix, func() error {
		return scanRow(ctx, b.db, b.sql.version, &v, &rev)
	})
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, b.errorf(what, b.prefix, "%s_meta has no row; it is not Simba's: %w", b.prefix, ErrSchema)
	case err == nil && v == SchemaVersion:
		return rev, nil
	case err == nil && v > SchemaVersion:
		return 0, b.errorf(what, b.prefix, "the tables are version %d, newer than this package's %d: %w", v, SchemaVersion, ErrSchema)
	case err == nil:
		return 0, b.errorf(what, b.prefix, "the tables are version %d, older than this package's %d; migrate them (Backend.Migrate, or run %s): %w",
			v, SchemaVersion, schemaFileName, ErrSchema)
	case missing(err):
		return 0, b.errorf(what, b.prefix, "there are no Simba tables with prefix %s in the database: run %s (SchemaSQL), "+
			"or let the backend create them (do not open it with WithoutMigration): %w: %w", b.prefix, schemaFileName, ErrNoSchema, err)
	case errors.As(err, &me) && me.Number == errNoDatabase:
		return 0, b.errorf(what, b.prefix, "the connection has no database; name one in the DSN (user@tcp(host:3306)/DATABASE): %w", err)
	case errors.As(err, &me) && (me.Number == errTableAccess || me.Number == errDBAccess):
		return 0, b.errorf(what, b.prefix, "the user may not read %s_meta: GRANT SELECT ON %s_meta and EXECUTE on the database to it: %w",
			b.prefix, b.prefix, err)
	}
	return 0, err
}

// migrateNow creates the tables if checkVersion says they are missing, and
// replaces the procedures if they are of an older revision.
func (b *Backend) migrateNow(ctx context.Context) error {
	rev, err := b.checkVersion(ctx)
	switch {
	case err == nil && rev >= routinesRevision:
		return b.checkEngines(ctx)
	case err == nil:
		if err := b.runSchema(ctx, false); err != nil {
			return err
		}
		b.logger.Info("simbamysql: replaced the procedures by this package's revision",
			slog.String("prefix", b.prefix), slog.Int("from", rev), slog.Int("to", routinesRevision))
		return b.checkEngines(ctx)
	case !errors.Is(err, ErrNoSchema):
		return err
	}
	if err := b.runSchema(ctx, true); err != nil {
		return err
	}
	if err := b.checkEngines(ctx); err != nil {
		return err
	}
	var created, now int64
	if err := scanRow(ctx, b.db, "SELECT created_us, CAST(@@timestamp * 1000000 AS SIGNED) FROM "+b.prefix+"_meta", &created, &now); err == nil {
		if guard := time.Duration(created-now)*time.Microsecond + b.maxLease; guard > 0 {
			b.logger.Info("simbamysql: created the tables; the amnesia guard grants no lease until MaxLease has passed",
				slog.String("prefix", b.prefix), slog.Duration("remaining", guard))
		}
	}
	return nil
}

// runSchema runs schema.sql's statements on one connection, holding a named
// lock that other migrations of the prefix wait for. Creating, it first
// refuses a prefix whose tables exist without the meta table.
func (b *Backend) runSchema(ctx context.Context, creating bool) error {
	const what = "migrate"
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return storeerr.Unavailable(ctx, "simbamysql", what, err)
	}
	defer conn.Close()
	// The lock's name as a literal: a statement with arguments would be
	// prepared, and closing it is a write without a deadline (see callSQL).
	lock := string(appendHex(nil, []byte("simba migrate "+b.prefix)))
	var got sql.NullInt64
	if err := scanRow(ctx, conn, "SELECT GET_LOCK(CONCAT(COALESCE(DATABASE(), ''), ' ', "+lock+"), 30)", &got); err == nil && got.Int64 == 1 {
		defer func() {
			// Released even if ctx ended, but never waited for long: the
			// lock ends with the connection anyway.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pollWithin)
			defer cancel()
			conn.ExecContext(rctx, "DO RELEASE_LOCK(CONCAT(COALESCE(DATABASE(), ''), ' ', "+lock+"))")
		}()
	} // else: a server that refuses GET_LOCK (Galera): the statements are idempotent
	var version string
	if err := scanRow(ctx, conn, "SELECT VERSION()", &version); err != nil {
		return storeerr.Unavailable(ctx, "simbamysql", what, err)
	}
	if creating {
		if err := b.refuseForeign(ctx, conn); err != nil {
			return err
		}
	}
	for _, stmt := range schemaStatements(b.prefix, strings.Contains(strings.ToLower(version), "mariadb")) {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && (me.Number == errDBAccess || me.Number == errTableAccess || me.Number == 1227 || me.Number == 1044) {
				return b.errorf(what, b.prefix, "the user lacks a privilege the migration needs (CREATE, CREATE ROUTINE, ALTER ROUTINE on the database): "+
					"grant them, or have a user that has them run %s once (SchemaSQL returns the same SQL), then GRANT EXECUTE and open the backend WithoutMigration: %w",
					schemaFileName, err)
			}
			return storeerr.Unavailable(ctx, "simbamysql", what+" "+b.prefix, err)
		}
	}
	return nil
}

// refuseForeign refuses a prefix some of whose table names are taken while
// its meta table is missing.
func (b *Backend) refuseForeign(ctx context.Context, conn *sql.Conn) error {
	var names []string
	for _, t := range tableNames {
		names = append(names, "'"+b.prefix+"_"+t+"'")
	}
	var taken sql.NullString
	err := scanRow(ctx, conn, "SELECT GROUP_CONCAT(table_name ORDER BY table_name) FROM information_schema.tables "+
		"WHERE table_schema = DATABASE() AND table_name IN ("+strings.Join(names, ", ")+")", &taken)
	if err != nil {
		return storeerr.Unavailable(ctx, "simbamysql", "migrate "+b.prefix, err)
	}
	if taken.Valid && taken.String != "" {
		return b.errorf("migrate", b.prefix, "tables %s exist but %s_meta does not: they are not Simba's; choose another prefix (WithPrefix): %w",
			taken.String, b.prefix, ErrSchema)
	}
	return nil
}

// checkEngines refuses tables in another engine than InnoDB (which a server
// without InnoDB, or with NO_ENGINE_SUBSTITUTION off, may have created):
// the procedures need its transactions and row locks.
func (b *Backend) checkEngines(ctx context.Context) error {
	var names []string
	for _, t := range tableNames {
		names = append(names, "'"+b.prefix+"_"+t+"'")
	}
	var other sql.NullString
	err := b.retry(ctx, "check tables", b.prefix, func() error {
		return scanRow(ctx, b.db, "SELECT GROUP_CONCAT(CONCAT(table_name, ' (', COALESCE(engine, '?'), ')') ORDER BY table_name) "+
			"FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ("+strings.Join(names, ", ")+") "+
			"AND COALESCE(engine, '') <> 'InnoDB'", &other)
	})
	if err != nil {
		return err
	}
	if other.Valid && other.String != "" {
		return b.errorf("check tables", b.prefix, "%s: want ENGINE=InnoDB (transactions and row locks); convert them with ALTER TABLE … ENGINE=InnoDB: %w",
			other.String, ErrSchema)
	}
	return nil
}
