package simbapg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/check"
	"github.com/simba-go/simba/backends/internal/guardlog"
	"github.com/simba-go/simba/backends/internal/sweeper"
	"github.com/simba-go/simba/backends/internal/watch"
)

// DefaultSchema is the schema of a [Backend] unless [WithSchema] says
// otherwise.
const DefaultSchema = "simba"

// DefaultMaxLease is the longest session time to live a [Backend] grants
// unless [WithMaxLease] says otherwise. It is also the amnesia guard's
// lock-delay.
const DefaultMaxLease = 60 * time.Second

// maxSchemaLen bounds the schema name, so that the release channel's name,
// the schema's name and ".released", fits PostgreSQL's 63-byte identifiers.
const maxSchemaLen = 54

// args checks the arguments of the backend's operations.
var args = check.For("simbapg")

// ErrSchema reports a schema that this version of the package cannot use: one
// of a newer version (written by a newer version of this package), or an
// existing schema that holds other objects than Simba's. Use another schema
// ([WithSchema]), or upgrade this package.
var ErrSchema = errors.New("incompatible schema")

// ErrNoSchema reports a schema that does not exist, opened with
// [WithoutMigration].
var ErrNoSchema = errors.New("no such schema")

// Backend is a Simba store in PostgreSQL: it implements [backends.Backend],
// [backends.StoreClock] and [backends.Inspector], and the sessions it opens
// implement [backends.Session], [backends.Notifier] and
// [backends.BatchSession]. It is safe for
// concurrent use. Create it with [New] or [Open]; end it with
// [Backend.Close].
type Backend struct {
	pool      *pgxpool.Pool
	ownsPool  bool
	schema    string
	channel   string // the release channel: schema + ".released"
	maxLease  time.Duration
	migrate   bool // create or check the schema on first use
	notify    bool // LISTEN, and NOTIFY releases
	logger    *slog.Logger
	sql       statements
	closed    atomic.Bool
	closeOnce sync.Once
	feed      *watch.Feed // the release subscription, started by the first Watch
	follow    follower    // the advisory locks that make grants of watched names notify (notify.go)

	// ready is set once the schema is known to be there, at this package's
	// version; cleared when a call finds it gone. migrating serialises the
	// checks (a semaphore a waiting call can give up on).
	ready     atomic.Bool
	migrating chan struct{}
	// revision is the revision of the schema's functions, once known: the
	// batches call the functions it has (see batch.go).
	revision atomic.Int32

	listenerPID atomic.Uint32 // backend pid of the current LISTEN connection, for tests

	guardLog guardlog.Log // the amnesia guard's warnings, one per guard

	// The sweeps of closed sessions that held more than one close call
	// releases, which go on after Close returned (see sweep); Close of the
	// backend stops them and waits for them.
	sweeps *sweeper.Sweeper
}

var (
	_ backends.Backend    = (*Backend)(nil)
	_ backends.StoreClock = (*Backend)(nil)
	_ backends.Inspector  = (*Backend)(nil)
)

// Option configures a [Backend].
type Option func(*options)

type options struct {
	schema   *string
	maxLease *time.Duration
	migrate  *bool
	notify   *bool
	logger   *slog.Logger
}

// WithSchema sets the schema that holds the backend's tables and functions
// (created by the migration unless [WithoutMigration]): 1 to 54 characters of
// [a-z0-9_], starting with a letter or "_", so that it needs no quoting. The
// schema also names the release channel, schema + ".released" (channels are
// shared by the whole database). Backends with different schemas share
// nothing. The default is [DefaultSchema].
func WithSchema(schema string) Option { return func(o *options) { o.schema = &schema } }

// WithMaxLease sets the longest session time to live the backend grants:
// longer requests are clamped to it, and the reply says what was granted
// (C2). It is also the amnesia guard's lock-delay: after the schema was
// created, no lease is granted until d has passed (§15). Every node of a
// schema must use the same value. It must be at least a millisecond. The
// default is [DefaultMaxLease].
func WithMaxLease(d time.Duration) Option { return func(o *options) { o.maxLease = &d } }

// WithoutMigration stops the backend from creating or upgrading its schema:
// it only checks, on first use, that the schema is there at the version it
// knows, and fails otherwise, naming the SQL file to run ([SchemaSQL]). Use it
// when the application's role may not create schemas and a DBA installs it.
func WithoutMigration() Option { return func(o *options) { f := false; o.migrate = &f } }

// WithNotifications sets whether the backend delivers release notifications
// (the default): it LISTENs on one connection of its own and its sessions'
// releases, closes and reaps NOTIFY the schema's channel, so that candidates
// of other nodes take over at once (A1). Without them, its sessions'
// watches never fire and its releases wake nobody: candidates take over at
// their next attempt. PostgreSQL serialises the commits of transactions that
// NOTIFY, database-cluster-wide; turn them off at thousands of releases per
// second, or behind a pooler that cannot pass them on. Use one setting on
// every node of a schema.
func WithNotifications(on bool) Option { return func(o *options) { o.notify = &on } }

// WithLogger sets the logger for the backend's few logs (the release
// subscription reconnecting or unsupported, the amnesia guard refusing
// grants, the schema created). The default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New returns a backend that uses pool, which stays the caller's: the backend
// never closes it. It makes no call to PostgreSQL: the first operation creates
// the schema if it is missing ([Backend.Migrate]), or checks it under
// [WithoutMigration].
//
// Every call takes a context whose deadline bounds it (D2); pgx honours
// it. Call [Backend.Close] when done: it stops the backend's release
// subscription.
func New(pool *pgxpool.Pool, opts ...Option) (*Backend, error) {
	if pool == nil {
		return nil, errors.New("simbapg: New: nil pool")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return build(pool, o)
}

func build(pool *pgxpool.Pool, o options) (*Backend, error) {
	b := &Backend{
		pool:      pool,
		schema:    DefaultSchema,
		maxLease:  DefaultMaxLease,
		migrate:   true,
		notify:    true,
		logger:    o.logger,
		migrating: make(chan struct{}, 1),
	}
	b.sweeps = sweeper.New()
	if o.schema != nil {
		b.schema = *o.schema
	}
	if o.maxLease != nil {
		b.maxLease = *o.maxLease
	}
	if o.migrate != nil {
		b.migrate = *o.migrate
	}
	if o.notify != nil {
		b.notify = *o.notify
	}
	if err := validSchema(b.schema); err != nil {
		return nil, err
	}
	if b.maxLease < time.Millisecond {
		return nil, fmt.Errorf("simbapg: WithMaxLease(%v): want at least 1ms", b.maxLease)
	}
	b.maxLease = b.maxLease.Truncate(time.Microsecond)
	if b.logger == nil {
		b.logger = slog.New(slog.DiscardHandler)
	}
	b.channel = b.schema + ".released"
	b.sql = newStatements(b.schema)
	b.feed = watch.NewFeed(listener{b}, b.logger, slog.String("backend", "simbapg"), slog.String("schema", b.schema))
	if b.notify {
		b.feed.Follow(b.followHolders, followEvery)
	}
	return b, nil
}

func validSchema(s string) error {
	if s == "" || len(s) > maxSchemaLen {
		return fmt.Errorf("simbapg: WithSchema(%q): %d bytes; want 1 to %d characters of [a-z0-9_]", s, len(s), maxSchemaLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("simbapg: WithSchema(%q): byte %q at %d; want [a-z_] then [a-z0-9_]", s, c, i)
		}
	}
	if len(s) >= 3 && s[:3] == "pg_" {
		return fmt.Errorf("simbapg: WithSchema(%q): names starting with pg_ are reserved by PostgreSQL", s)
	}
	return nil
}

// Close stops the backend's release subscription, closes the pool if the
// backend opened it ([Open]), and makes every later call fail with
// [backends.ErrClosed]. Sessions are not closed: close them first (the
// runtime's Client.Close does), or they expire on their own. Closing twice
// returns nil.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.sweeps.Close()
		b.feed.Close()
		b.follow.close()
		if b.ownsPool {
			b.pool.Close()
		}
	})
	return nil
}

// Schema returns the schema that holds the backend's tables and functions.
func (b *Backend) Schema() string { return b.schema }

// Channel returns the name of the release channel (see the package
// documentation).
func (b *Backend) Channel() string { return b.channel }

// MaxLease returns the longest time to live the backend grants, which is
// also its amnesia guard's lock-delay.
func (b *Backend) MaxLease() time.Duration { return b.maxLease }

// StoreTime returns PostgreSQL's clock (clock_timestamp()), read in one round
// trip.
func (b *Backend) StoreTime(ctx context.Context) (time.Time, error) {
	if b.closed.Load() {
		return time.Time{}, fmt.Errorf("simbapg: store time: %w", backends.ErrClosed)
	}
	var t time.Time
	err := b.retry(ctx, "store time", "", func() error {
		return b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
	})
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// statements are the backend's SQL, each one call of a function of its
// schema.
type statements struct {
	open, keepAlive, owned, acquire, release, holder, putValue string
	acquireBatch, acquireEach, releaseBatch                    string // see batch.go
	join, leave, members, close                                string
	inspectSessions, inspectLeases, inspectGroups              string
	version                                                    string
	guard                                                      string // when the amnesia guard started, relative to now (µs), read by Inspect
}

func newStatements(schema string) statements {
	s := pgx.Identifier{schema}.Sanitize() + "."
	call := func(fn string, n int) string {
		q := "SELECT * FROM " + s + fn + "("
		for i := 1; i <= n; i++ {
			if i > 1 {
				q += ", "
			}
			q += fmt.Sprintf("$%d", i)
		}
		return q + ")"
	}
	return statements{
		open:         call("open_session", 4),
		keepAlive:    call("keep_alive", 2),
		owned:        call("owned", 1),
		acquire:      call("acquire", 6),
		release:      call("release", 4),
		holder:       call("holder", 2),
		putValue:     call("put_value", 4),
		join:         call("join_group", 4),
		leave:        call("leave_group", 2),
		members:      call("members_of", 2),
		close:        call("close_session", 2),
		acquireBatch: call("acquire_batch", 6),
		acquireEach: "SELECT a.* FROM unnest($2::text[], $3::text[], $4::integer[]) WITH ORDINALITY AS x(name, grp, part, i) " +
			"CROSS JOIN LATERAL " + s + "acquire($1, x.name, x.grp, x.part, $5, $6) AS a ORDER BY x.i",
		releaseBatch: "SELECT r.* FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS x(name, tok, i) " +
			"CROSS JOIN LATERAL " + s + "release($1, x.name, x.tok, $4) AS r ORDER BY x.i",
		inspectSessions: call("inspect_sessions", 2),
		inspectLeases:   call("inspect_leases", 2),
		inspectGroups:   call("inspect_groups", 2),
		version:         "SELECT version, coalesce(obj_description('" + s + "meta'::regclass, 'pg_class'), '') FROM " + s + "meta",
		guard:           "SELECT CASE WHEN isfinite(guard_from) THEN floor(extract(epoch FROM guard_from - clock_timestamp()) * 1000000)::bigint END FROM " + s + "meta",
	}
}

// unexpected reports a status a function should not return.
func (b *Backend) unexpected(what, status string) error {
	return fmt.Errorf("simbapg: %s: unexpected status %q from schema %s", what, status, b.schema)
}
