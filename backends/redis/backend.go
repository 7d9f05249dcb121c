package simbaredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/check"
	"github.com/simba-go/simba/backends/internal/guardlog"
	"github.com/simba-go/simba/backends/internal/storeerr"
	"github.com/simba-go/simba/backends/internal/sweeper"
	"github.com/simba-go/simba/backends/internal/watch"
)

// DefaultPrefix is the key prefix of a [Backend] unless [WithPrefix] says
// otherwise: its keys are "{simba}:…".
const DefaultPrefix = "simba"

// DefaultMaxLease is the longest session time to live a [Backend] grants
// unless [WithMaxLease] says otherwise. It is also the amnesia guard's
// lock-delay.
const DefaultMaxLease = 60 * time.Second

// maxPrefixLen bounds the prefix, so that keys stay short.
const maxPrefixLen = 64

// args checks the arguments of the backend's operations.
var args = check.For("simbaredis")

// ErrLayout reports a namespace written by an incompatible version of this
// package (its key layout version differs), so that two versions never share
// a namespace silently. Use another prefix, or stop the other version.
var ErrLayout = errors.New("incompatible key layout")

// Backend is a Simba store in Redis: it implements [backends.Backend] and
// [backends.StoreClock], and the sessions it opens implement
// [backends.Session], [backends.Notifier] and [backends.BatchSession]. It is
// safe for concurrent use.
// Create it with [New] or [Open]; end it with [Backend.Close].
type Backend struct {
	client     redis.UniversalClient
	ownsClient bool
	prefix     string
	keys       layout
	maxLease   time.Duration
	logger     *slog.Logger

	// Every script's KEYS, and arguments every call passes (see run).
	metaKeys    []string
	baseArg     any
	maxLeaseArg any

	closed    atomic.Bool
	closeOnce sync.Once
	readOnly  bool        // WithReadOnly: Inspect only
	feed      *watch.Feed // the release subscription, started by the first Watch
	armed     armed       // the scripts without INFO (armed.go)
	node      string      // this backend's node id: its wake channel, and its place among a lease's waiters

	guardLog guardlog.Log // the amnesia guard's warnings, one per guard

	// The sweeps of closed sessions that held more than one close call
	// releases, which go on after Close returned (see sweep); Close of the
	// backend stops them and waits for them.
	sweeps *sweeper.Sweeper
}

var (
	_ backends.Backend    = (*Backend)(nil)
	_ backends.StoreClock = (*Backend)(nil)
)

// Option configures a [Backend].
type Option func(*options)

type options struct {
	prefix   string
	maxLease time.Duration
	logger   *slog.Logger
	readOnly bool
}

// WithPrefix sets the key prefix: every key of the backend is
// "{prefix}:…", one hash tag, so that the namespace lives in one Redis
// Cluster slot. Backends with different prefixes share nothing. The prefix
// is 1 to 64 characters of [A-Za-z0-9._:-]. The default is [DefaultPrefix].
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithMaxLease sets the longest session time to live the backend grants:
// longer requests are clamped to it, and the reply says what was granted
// (C2). It is also the amnesia guard's lock-delay: after Redis lost its
// state, no lease is granted until d has passed (§15). Every node of a
// namespace must use the same value. It must be at least a millisecond. The
// default is [DefaultMaxLease].
func WithMaxLease(d time.Duration) Option { return func(o *options) { o.maxLease = d } }

// WithLogger sets the logger for the backend's few logs (the release
// subscription reconnecting, the amnesia guard refusing grants). The default
// discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithReadOnly makes a backend that only lists the namespace
// ([Backend.Inspect]), for status tools: it writes nothing to Redis — [Open]
// checks that Redis answers with a PING rather than the check script, which
// records the namespace and reaps — and OpenSession fails with
// [ErrReadOnly].
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// ErrReadOnly reports a session asked of a backend made with
// [WithReadOnly].
var ErrReadOnly = errors.New("backend opened read-only")

// New returns a backend that uses client, which stays the caller's: the
// backend never closes it. It makes no call to Redis; every operation checks
// the namespace itself, and [Backend.Check] does so up front.
//
// Every call takes a context whose deadline must bound the call (D2),
// which go-redis honours only with ContextTimeoutEnabled. New returns an
// error if client is a *redis.Client, *redis.ClusterClient or *redis.Ring
// without it; for other implementations of redis.UniversalClient, the caller
// makes sure.
//
// Call [Backend.Close] when done: it stops the backend's release
// subscription.
func New(client redis.UniversalClient, opts ...Option) (*Backend, error) {
	if client == nil {
		return nil, errors.New("simbaredis: New: nil client")
	}
	o := options{prefix: DefaultPrefix, maxLease: DefaultMaxLease}
	for _, opt := range opts {
		opt(&o)
	}
	if err := validPrefix(o.prefix); err != nil {
		return nil, err
	}
	if o.maxLease < time.Millisecond {
		return nil, fmt.Errorf("simbaredis: WithMaxLease(%v): want at least 1ms", o.maxLease)
	}
	if !contextTimeouts(client) {
		return nil, fmt.Errorf("simbaredis: New: the client (%T) ignores context deadlines: set ContextTimeoutEnabled "+
			"in its options, so that every call returns by its deadline (D2)", client)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{
		client:   client,
		prefix:   o.prefix,
		keys:     newLayout(o.prefix),
		maxLease: o.maxLease,
		logger:   o.logger,
		readOnly: o.readOnly,
	}
	b.node = randomNode()
	b.sweeps = sweeper.New()
	b.metaKeys = []string{b.keys.meta()}
	b.baseArg = b.keys.base
	b.maxLeaseArg = strconv.FormatInt(micros(o.maxLease), 10)
	b.feed = watch.NewFeed(releases{b}, b.logger, slog.String("backend", "simbaredis"), slog.String("prefix", b.prefix))
	if !b.readOnly {
		b.feed.Follow(b.followHolders, followEvery)
	}
	return b, nil
}

// contextTimeouts reports whether client honours context deadlines, as far
// as its type tells.
func contextTimeouts(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

func validPrefix(p string) error {
	if p == "" || len(p) > maxPrefixLen {
		return fmt.Errorf("simbaredis: WithPrefix(%q): %d bytes; want 1 to %d characters of [A-Za-z0-9._:-]", p, len(p), maxPrefixLen)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("simbaredis: WithPrefix(%q): byte %q at %d; want only [A-Za-z0-9._:-]", p, c, i)
		}
	}
	return nil
}

// SetDriverLogger sends the log lines of go-redis — which it writes to
// standard error through one process-wide logger, whatever client they come
// from (a dial that failed, a connection pool that gave up) — to l, at the
// Warn level, or drops them if l is nil. It changes go-redis's global
// logger: call it from main, once, not from a library.
func SetDriverLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	redis.SetLogger(driverLogger{l})
}

// driverLogger adapts a *slog.Logger to go-redis's logger.
type driverLogger struct{ l *slog.Logger }

func (d driverLogger) Printf(ctx context.Context, format string, v ...any) {
	d.l.WarnContext(ctx, fmt.Sprintf(format, v...), slog.String("driver", "go-redis"))
}

// Close stops the backend's release subscription, closes the client if the
// backend opened it ([Open]), and makes every later call fail with
// [backends.ErrClosed]. Sessions are not closed: close them first (the
// runtime's Client.Close does), or they expire on their own. Closing twice
// returns nil.
func (b *Backend) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.sweeps.Close()
		b.feed.Close()
		if b.ownsClient {
			err = b.client.Close()
		}
	})
	return err
}

// Prefix returns the key prefix: the backend's keys are "{prefix}:…".
func (b *Backend) Prefix() string { return b.prefix }

// MaxLease returns the longest time to live the backend grants, which is
// also its amnesia guard's lock-delay.
func (b *Backend) MaxLease() time.Duration { return b.maxLease }

// Check makes one call to Redis that checks the namespace: its layout
// version (an error wrapping [ErrLayout] if another version of this package
// wrote it), and whether Redis lost its state (starting the amnesia guard if
// so). Every operation does the same, so calling it is optional; it is a way
// to fail fast at start-up.
func (b *Backend) Check(ctx context.Context) error {
	_, err := b.run(ctx, scriptCheck, "check", noSession)
	return err
}

// StoreTime returns Redis's clock (TIME), read in one round trip.
func (b *Backend) StoreTime(ctx context.Context) (time.Time, error) {
	if b.closed.Load() {
		return time.Time{}, fmt.Errorf("simbaredis: store time: %w", backends.ErrClosed)
	}
	t, err := b.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, b.unavailable(ctx, "store time", err)
	}
	return t.UTC(), nil
}

// randomNode returns a node id for a backend: 64 random bits in hex.
func randomNode() string {
	var id [8]byte
	rand.Read(id[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(id[:])
}

// unexpected reports a status a script should not return.
func (b *Backend) unexpected(what string, r reply) error {
	return fmt.Errorf("simbaredis: %s: unexpected reply %v", what, []any(r))
}

// unavailable wraps a driver error, which means the store could not be
// reached, did not answer in time, or refused to serve (an error reply).
func (b *Backend) unavailable(ctx context.Context, what string, err error) error {
	return storeerr.Unavailable(ctx, "simbaredis", what, err)
}

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func storeTime(us int64) time.Time { return time.UnixMicro(us).UTC() }
