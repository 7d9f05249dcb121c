package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/check"
	"github.com/simba-go/simba/backends/internal/guardlog"
	"github.com/simba-go/simba/backends/internal/watch"
)

// DefaultPrefix starts the names of a [Backend]'s tables and procedures unless
// [WithPrefix] says otherwise.
const DefaultPrefix = "simba"

// DefaultMaxLease is the longest session time to live a [Backend] grants
// unless [WithMaxLease] says otherwise. It is also the amnesia guard's
// lock-delay.
const DefaultMaxLease = 60 * time.Second

// DefaultPollInterval is how often a backend whose candidates wait for a
// release asks the database for releases, unless [WithPollInterval] says
// otherwise.
const DefaultPollInterval = 50 * time.Millisecond

// maxPrefixLen bounds the prefix so that every name made from it (the
// longest is prefix + "_groups_digest") fits MySQL's 64-character
// identifiers.
const maxPrefixLen = 40

// args checks the arguments of the backend's operations.
var args = check.For("simbamysql")

// ErrSchema reports tables or procedures that this version of the package
// cannot use: tables of a newer version (written by a newer version of this
// package), tables with the backend's prefix that are not Simba's, or tables
// in another storage engine than InnoDB. Use another prefix ([WithPrefix]),
// upgrade this package, or convert the tables.
var ErrSchema = errors.New("incompatible schema")

// ErrNoSchema reports that the backend's tables do not exist, opened with
// [WithoutMigration].
var ErrNoSchema = errors.New("no such schema")

// Backend is a Simba store in MySQL or MariaDB: it implements
// [backends.Backend], [backends.StoreClock] and [backends.Inspector], and
// the sessions it opens implement [backends.Session] and
// [backends.Notifier]. It is safe for concurrent use. Create it with [New]
// or [Open]; end it with [Backend.Close].
type Backend struct {
	db        *sql.DB
	ownsDB    bool
	prefix    string
	maxLease  time.Duration
	poll      time.Duration // 0: no release notifications
	migrate   bool
	readOnly  bool
	logger    *slog.Logger
	sql       statements
	closed    atomic.Bool
	closeOnce sync.Once
	feed      *watch.Feed // the poll of releases, started by the first Watch
	bells     *bells      // the GET_LOCK wake-ups on top of the poll

	// ready is set once the tables are known to be there, at this package's
	// version; cleared when a call finds them gone. migrating serialises
	// the checks (a semaphore a waiting call can give up on).
	ready     atomic.Bool
	migrating chan struct{}

	guardLog guardlog.Log // the amnesia guard's warnings, one per guard
}

var (
	_ backends.Backend    = (*Backend)(nil)
	_ backends.StoreClock = (*Backend)(nil)
	_ backends.Inspector  = (*Backend)(nil)
)

// Option configures a [Backend].
type Option func(*options)

type options struct {
	prefix   *string
	maxLease *time.Duration
	poll     *time.Duration
	bells    *int
	bellDB   *sql.DB // Open's: the bells' own pool
	migrate  *bool
	readOnly bool
	logger   *slog.Logger
}

// WithPrefix sets the prefix of the names of the backend's tables and
// procedures (prefix_sessions, prefix_acquire, …) in the connection's
// database: 1 to 40 characters of [a-z0-9_], starting with a letter, so that
// they need no quoting. Backends with different prefixes share nothing. The
// default is [DefaultPrefix].
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = &prefix } }

// WithMaxLease sets the longest session time to live the backend grants:
// longer requests are clamped to it, and the reply says what was granted
// (C2). It is also the amnesia guard's lock-delay: after the tables were
// created, no lease is granted until d has passed (§15). Every node of a
// prefix must use the same value. It must be at least a millisecond. The
// default is [DefaultMaxLease].
func WithMaxLease(d time.Duration) Option { return func(o *options) { o.maxLease = &d } }

// WithPollInterval sets how often the backend asks the database for
// releases while some candidate of its sessions waits for one (see the
// package documentation): a graceful hand-off to this backend's candidates
// then takes at most d plus two round trips. 0 turns the poll off: candidates
// take over at their next attempt, or at the holder's expiry. It must be 0 or
// at least a millisecond. The default is [DefaultPollInterval].
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.poll = &d } }

// WithBells sets how many names the backend's candidates wait for with a
// bell at once (see the package documentation); 0 turns the bells off, and
// the backend then holds none either. A backend made by [Open] has bells by
// default ([DefaultBells]), on a small pool of its own, dialled with the
// same settings: at most n+1 connections, one per name waited on while a
// candidate waits and one while its sessions hold leases. A backend made by
// [New] has none unless this option asks, and then takes them from the
// caller's pool: give it n+1 connections more (with SetMaxOpenConns(m)
// before New, the bells take at most m/4 of them, and none if m < 8), and
// know that a connection taken may be the pool's only idle one, so that a
// later call dials (a spare is dialled at once to take its place).
func WithBells(n int) Option { return func(o *options) { o.bells = &n } }

// WithoutMigration stops the backend from creating or upgrading its tables
// and procedures: it only checks, on first use, that they are there at the
// version it knows, and fails otherwise, naming the SQL file to run
// ([SchemaSQL]). Use it when the application's user may not create tables
// and routines and a DBA installs them.
func WithoutMigration() Option { return func(o *options) { f := false; o.migrate = &f } }

// WithReadOnly opens the backend for listing only, as status tools do: it
// creates nothing, migrates nothing, opens no session, polls nothing, and
// its only statements are the SELECTs of [Backend.Inspect] and
// [Backend.StoreTime]. OpenSession fails.
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// WithLogger sets the logger for the backend's few logs (the release poll
// failing, the amnesia guard refusing grants, the tables created). The
// default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New returns a backend that uses db, a pool of go-sql-driver/mysql
// connections, which stays the caller's: the backend never closes it. It
// makes no call to the database: the first operation creates the tables and
// procedures if they are missing ([Backend.Migrate]), or checks them under
// [WithoutMigration].
//
// The backend depends on no setting of the pool's DSN: it reads no
// RowsAffected (so clientFoundRows does not matter), sends one statement per
// call (multiStatements is not needed), reads no DATETIME (parseTime does not
// matter) and keeps time as microseconds since the epoch (time_zone does not
// matter). The pool must run with autocommit on, as go-sql-driver does
// unless the DSN says autocommit=0.
//
// Every call takes a context whose deadline bounds it (D2); go-sql-driver
// ends a call whose context ends by closing its connection. Give the pool's
// DSN a writeTimeout (Open's pools have 5s): go-sql-driver closes an idle
// connection with a write that otherwise waits forever for a silent link,
// which holds up the pool's Close. Call
// [Backend.Close] when done: it stops the backend's release poll.
func New(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, errors.New("simbamysql: New: nil *sql.DB")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return build(db, o)
}

func build(db *sql.DB, o options) (*Backend, error) {
	b := &Backend{
		db:        db,
		prefix:    DefaultPrefix,
		maxLease:  DefaultMaxLease,
		poll:      DefaultPollInterval,
		migrate:   true,
		readOnly:  o.readOnly,
		logger:    o.logger,
		migrating: make(chan struct{}, 1),
	}
	if o.prefix != nil {
		b.prefix = *o.prefix
	}
	if o.maxLease != nil {
		b.maxLease = *o.maxLease
	}
	if o.poll != nil {
		b.poll = *o.poll
	}
	if o.migrate != nil {
		b.migrate = *o.migrate
	}
	nbells, bellDB := 0, db
	if o.bellDB != nil {
		nbells, bellDB = DefaultBells, o.bellDB
	}
	if o.bells != nil {
		nbells = *o.bells
	}
	if nbells < 0 {
		return nil, fmt.Errorf("simbamysql: WithBells(%d): want 0 (no bells) or more", nbells)
	}
	if limit := db.Stats().MaxOpenConnections; limit > 0 && bellDB == db {
		nbells = min(nbells, limit/4-1) // the holding connection is the last of limit/4
	}
	if b.readOnly {
		b.migrate, b.poll, nbells = false, 0, 0
	}
	if err := validPrefix(b.prefix); err != nil {
		return nil, err
	}
	if b.maxLease < time.Millisecond {
		return nil, fmt.Errorf("simbamysql: WithMaxLease(%v): want at least 1ms", b.maxLease)
	}
	if b.poll != 0 && b.poll < time.Millisecond {
		return nil, fmt.Errorf("simbamysql: WithPollInterval(%v): want 0 (no polling) or at least 1ms", b.poll)
	}
	b.maxLease = b.maxLease.Truncate(time.Microsecond)
	if b.logger == nil {
		b.logger = slog.New(slog.DiscardHandler)
	}
	b.sql = newStatements(b.prefix)
	b.feed = watch.NewFeed(poller{b}, b.logger, slog.String("backend", "simbamysql"), slog.String("prefix", b.prefix))
	if o.bellDB != nil {
		o.bellDB.SetMaxOpenConns(max(nbells, 0) + 1)
		o.bellDB.SetMaxIdleConns(1)
	}
	b.bells = newBells(b, bellDB, o.bellDB != nil, max(nbells, 0))
	return b, nil
}

func validPrefix(s string) error {
	if s == "" || len(s) > maxPrefixLen {
		return fmt.Errorf("simbamysql: WithPrefix(%q): %d bytes; want 1 to %d characters of [a-z0-9_]", s, len(s), maxPrefixLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || i > 0 && (c == '_' || '0' <= c && c <= '9')) {
			return fmt.Errorf("simbamysql: WithPrefix(%q): byte %q at %d; want a letter [a-z] first, then [a-z0-9_]", s, c, i)
		}
	}
	return nil
}

// Close stops the backend's release poll and its bells (giving their
// connections' named locks back), closes the pools if the backend opened
// them ([Open]), and makes every later
// call fail with [backends.ErrClosed]. Sessions are not closed: close them
// first (the runtime's Client.Close does), or they expire on their own.
// Closing twice returns nil.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.feed.Close()
		b.bells.close()
		if b.ownsDB {
			b.db.Close()
		}
	})
	return nil
}

// Prefix returns the prefix of the backend's tables and procedures.
func (b *Backend) Prefix() string { return b.prefix }

// MaxLease returns the longest time to live the backend grants, which is
// also its amnesia guard's lock-delay.
func (b *Backend) MaxLease() time.Duration { return b.maxLease }

// StoreTime returns the database's clock (@@timestamp, in UTC), read in one
// round trip.
func (b *Backend) StoreTime(ctx context.Context) (time.Time, error) {
	if b.closed.Load() {
		return time.Time{}, fmt.Errorf("simbamysql: store time: %w", backends.ErrClosed)
	}
	var us int64
	err := b.retry(ctx, "store time", "", func() error {
		return scanRow(ctx, b.db, "SELECT CAST(@@timestamp * 1000000 AS SIGNED)", &us)
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(us).UTC(), nil
}

// unexpected reports a status a procedure should not return.
func (b *Backend) unexpected(what, status string) error {
	return fmt.Errorf("simbamysql: %s: unexpected status %q from the procedures of prefix %s", what, status, b.prefix)
}

// recovering is the amnesia guard's refusal of a grant, remaining before
// it ends.
func (b *Backend) recovering(remaining time.Duration) *backends.RecoveringError {
	return &backends.RecoveringError{Remaining: max(0, remaining), MaxLease: b.maxLease, Why: fmt.Sprintf(whyRecovering, b.prefix)}
}

// whyRecovering is what the amnesia guard of a prefix's tables says it
// guards against (see the package documentation); %s is the prefix.
const whyRecovering = "the tables of prefix %s are new, or prefix_start_guard() was called, and they may replace ones " +
	"that were lost (a data directory wiped, a new server, the tables dropped, an older copy restored)"
