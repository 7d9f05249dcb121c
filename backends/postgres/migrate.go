package simbapg

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// schemaFile is schema.sql: a psql script (it names the schema with the psql
// variable schema, and sets its default with \if … \set).
//
//go:embed schema.sql
var schemaFile string

// SchemaVersion is the version of the schema this package creates and uses.
// It is recorded in the schema's meta table; a schema of a newer version is
// refused with an error wrapping [ErrSchema].
const SchemaVersion = 1

// functionsRevision is the revision of the functions of schema.sql, recorded
// in the comment of the schema's meta table ("functions revision N"; none
// means 1). Revisions change only the functions' bodies: the tables and the
// functions' signatures are those of SchemaVersion, so that code of every
// revision works with the functions of every other, and a migration replaces
// the functions of an older revision.
const functionsRevision = 5

// batchRevision is the first revision with acquire_batch (see batch.go).
const batchRevision = 5

// schemaFileName is where a DBA finds the schema's SQL, for error messages.
const schemaFileName = "schema.sql of github.com/simba-go/simba/backends/postgres"

// SchemaSQL returns the SQL that creates the schema of the given name at
// [SchemaVersion], or checks it if it is there already (and replaces its
// functions by this package's if they are older): schema.sql, shipped
// with this package, with the schema's name filled in and psql's commands
// taken out, for migration tools. Run it in one transaction (it takes an
// advisory lock that two runs wait for). psql runs schema.sql itself:
//
//	psql -1 -v schema=NAME -f schema.sql
func SchemaSQL(schema string) (string, error) {
	if err := validSchema(schema); err != nil {
		return "", err
	}
	return renderSchema(schema), nil
}

func renderSchema(schema string) string {
	var out strings.Builder
	for line := range strings.Lines(schemaFile) {
		if strings.HasPrefix(line, `\`) {
			continue // psql's \if, \set, \endif
		}
		out.WriteString(line)
	}
	s := out.String()
	s = strings.ReplaceAll(s, `:"schema"`, pgx.Identifier{schema}.Sanitize())
	s = strings.ReplaceAll(s, `:'schema'`, "'"+schema+"'")
	return s
}

// Migrate creates the backend's schema if it is missing, or checks that it is
// at [SchemaVersion]: a schema of a newer version, or an existing schema that
// holds other objects, is refused with an error wrapping [ErrSchema]. Two
// processes migrating at once wait for each other. A role that may not create
// the schema gets an error that names the privilege it lacks and how to have
// [SchemaSQL] run instead.
//
// A schema whose functions an older release of this package installed gets
// this package's (faster; same tables, same signatures, so that processes
// running the older release go on working). A role that may not replace
// them keeps the old ones, which work, and the backend logs a warning.
//
// The backend migrates by itself on first use, unless it was opened with
// [WithoutMigration]; calling Migrate is a way to do it, and fail, up front.
// A schema that is created starts the amnesia guard (see the package
// documentation): no lease is granted until MaxLease has passed.
func (b *Backend) Migrate(ctx context.Context) error {
	if b.closed.Load() {
		return b.errorf("migrate schema", b.schema, "%w", backends.ErrClosed)
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

// ensureSchema makes sure, once, that the schema is there: it migrates, or
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
		if rev, err = b.checkVersion(ctx); err == nil && rev < functionsRevision {
			b.logger.Warn("simbapg: the schema's functions are of an older revision; they work, "+
				"but run "+schemaFileName+" (or SchemaSQL) as the schema's owner to install the faster ones",
				slog.String("schema", b.schema), slog.Int("revision", rev), slog.Int("package revision", functionsRevision))
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
		return storeerr.Unavailable(ctx, "simbapg", fmt.Sprintf("check schema %q", b.schema), ctx.Err())
	}
}

func (b *Backend) unlockSchema() { <-b.migrating }

// checkVersion reads the schema's version and the revision of its
// functions: the error is nil if the version is SchemaVersion.
func (b *Backend) checkVersion(ctx context.Context) (revision int, err error) {
	what := "check schema"
	var (
		v       int32
		comment string
	)
	err = b.retry(ctx, what, b.schema, func() error { return b.pool.QueryRow(ctx, b.sql.version).Scan(&v, &comment) })
	var pe *pgconn.PgError
	switch {
	case err == nil && v == SchemaVersion:
		revision = parseRevision(comment)
		b.revision.Store(int32(revision))
		return revision, nil
	case err == nil && v > SchemaVersion:
		return 0, b.errorf(what, b.schema, "the schema is version %d, newer than this package's %d: %w", v, SchemaVersion, ErrSchema)
	case err == nil:
		return 0, b.errorf(what, b.schema, "the schema is version %d, older than this package's %d; migrate it (Backend.Migrate, or run %s): %w",
			v, SchemaVersion, schemaFileName, ErrSchema)
	case errors.As(err, &pe) && (pe.Code == codeNoSchema || pe.Code == codeNoTable):
		return 0, b.errorf(what, b.schema, "there is no Simba schema %s: run %s (psql -1 -v schema=%s -f schema.sql), "+
			"or let the backend create it (do not open it with WithoutMigration): %w: %w", b.schema, schemaFileName, b.schema, ErrNoSchema, err)
	case errors.As(err, &pe) && pe.Code == codeNoPrivilege:
		return 0, b.errorf(what, b.schema, "the role may not use schema %s: have its owner GRANT USAGE ON SCHEMA %s TO the role: %w",
			b.schema, pgx.Identifier{b.schema}.Sanitize(), err)
	}
	return 0, err
}

// parseRevision reads the revision of the functions from the comment of the
// meta table: "functions revision N"; none (revision 1 set no comment), or
// anything else, is 1.
func parseRevision(comment string) int {
	n, ok := strings.CutPrefix(comment, "functions revision ")
	if !ok {
		return 1
	}
	r, err := strconv.Atoi(n)
	if err != nil || r < 1 {
		return 1
	}
	return r
}

// migrateNow creates the schema if checkVersion says it is missing, and
// replaces its functions if they are of an older revision.
func (b *Backend) migrateNow(ctx context.Context) error {
	rev, err := b.checkVersion(ctx)
	var pe *pgconn.PgError
	switch {
	case err == nil && rev >= functionsRevision:
		return nil
	case err == nil:
		return b.upgradeFunctions(ctx, rev)
	case !errors.As(err, &pe) || (pe.Code != codeNoSchema && pe.Code != codeNoTable):
		return err
	}
	if err := b.runSchema(ctx); err != nil {
		if errors.As(err, &pe) && pe.Code == codeNoPrivilege {
			return b.privilegeError(ctx, err)
		}
		return err
	}
	b.revision.Store(functionsRevision)
	var created, now time.Time
	if err := b.pool.QueryRow(ctx, "SELECT created_at, clock_timestamp() FROM "+pgx.Identifier{b.schema}.Sanitize()+".meta").Scan(&created, &now); err == nil {
		if guard := created.Add(b.maxLease).Sub(now); guard > 0 {
			b.logger.Info("simbapg: created the schema; its amnesia guard grants no lease until MaxLease has passed",
				slog.String("schema", b.schema), slog.Duration("remaining", guard))
		}
	}
	return nil
}

// upgradeFunctions runs schema.sql on a schema whose functions are of
// revision rev, older than this package's: it replaces them, and changes
// nothing else. A role that may not (it does not own the schema) goes on
// with the old ones, which work.
func (b *Backend) upgradeFunctions(ctx context.Context, rev int) error {
	err := b.runSchema(ctx)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == codeNoPrivilege:
		b.logger.Warn("simbapg: the schema's functions are of an older revision, and this role may not replace them; "+
			"they work, but run "+schemaFileName+" (or SchemaSQL) as the schema's owner to install the faster ones",
			slog.String("schema", b.schema), slog.Int("revision", rev), slog.Int("package revision", functionsRevision),
			slog.String("error", pe.Message))
		return nil
	case errors.Is(err, ErrSchema):
		// Another process installed a newer revision meanwhile, which
		// works as well; or made the schema unusable, which checkVersion
		// says.
		_, err = b.checkVersion(ctx)
		return err
	case err != nil:
		return err
	}
	b.revision.Store(functionsRevision)
	b.logger.Info("simbapg: replaced the schema's functions by this package's revision",
		slog.String("schema", b.schema), slog.Int("from", rev), slog.Int("to", functionsRevision))
	return nil
}

// runSchema runs schema.sql in one transaction, and explains the refusals
// it raises.
func (b *Backend) runSchema(ctx context.Context) error {
	const what = "migrate schema"
	err := b.retry(ctx, what, b.schema, func() error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, renderSchema(b.schema))
			return err
		})
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == codeNewerSchema:
		return b.errorf(what, b.schema, "%s: %w", pe.Message, ErrSchema)
	case errors.As(err, &pe) && pe.Code == codeForeignSchema:
		return b.errorf(what, b.schema, "%s; choose another one (WithSchema): %w", pe.Message, ErrSchema)
	}
	return err
}

// privilegeError explains a migration that the role may not run: which
// privilege it lacks, and what to do instead.
func (b *Backend) privilegeError(ctx context.Context, err error) error {
	const what = "migrate schema"
	var (
		user, db                      string
		createDB, exists, createInSch bool
	)
	ferr := b.pool.QueryRow(ctx, `SELECT current_user, current_database(),
		has_database_privilege(current_database(), 'CREATE'), n.oid IS NOT NULL,
		coalesce(has_schema_privilege(n.oid, 'CREATE'), false)
		FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1`, b.schema).
		Scan(&user, &db, &createDB, &exists, &createInSch)
	if ferr != nil {
		return b.errorf(what, b.schema, "the role lacks a privilege the migration needs: %w", err)
	}
	ident := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	var lacks, grant string
	switch {
	case !exists && !createDB:
		lacks = fmt.Sprintf("the CREATE privilege on database %s, which creating schema %s needs", ident(db), b.schema)
		grant = fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s", ident(db), ident(user))
	case exists && !createInSch:
		lacks = fmt.Sprintf("the CREATE privilege on schema %s, which creating its tables and functions needs", b.schema)
		grant = fmt.Sprintf("GRANT CREATE ON SCHEMA %s TO %s", ident(b.schema), ident(user))
	default:
		lacks = "a privilege the migration needs (it must own the schema's objects)"
		grant = "have the schema's owner migrate it"
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		err = pe // the message says the rest
	}
	return b.errorf(what, b.schema, "role %s lacks %s: %s, or have a role that has it run %s once "+
		"(psql -1 -v schema=%s -f schema.sql; SchemaSQL returns the same SQL), then GRANT USAGE ON SCHEMA %s TO %s "+
		"and open the backend with WithoutMigration: %w",
		ident(user), lacks, grant, schemaFileName, b.schema, ident(b.schema), ident(user), err)
}
