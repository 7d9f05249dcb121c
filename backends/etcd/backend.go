package simbaetcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/check"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// DefaultPrefix is the key prefix of a [Backend] unless [WithPrefix] says
// otherwise.
const DefaultPrefix = "/simba/"

// DefaultMaxLease is the longest session time to live a [Backend] grants
// unless [WithMaxLease] says otherwise. It is also the amnesia guard's
// lock-delay.
const DefaultMaxLease = 60 * time.Second

// layoutVersion is the first line of the prefix's meta key; a prefix written
// by another version is refused with ErrLayout.
const layoutVersion = "simbaetcd 1"

// args checks the arguments of the backend's operations.
var args = check.For("simbaetcd")

// ErrLayout reports a prefix whose meta key was written by an incompatible
// version of this package (or by something else), so that two versions
// never share a prefix silently. Use another prefix.
var ErrLayout = errors.New("simbaetcd: incompatible layout under the prefix")

// Backend is a Simba store in etcd: it implements [backends.Backend],
// [backends.Inspector] and io.Closer, and the sessions it opens implement
// [backends.Session] and [backends.Notifier]. With [WithLocalClock] it also
// implements [backends.StoreClock] (see the package documentation). Every
// session is one etcd lease. It is safe for concurrent use. Create it with
// [New] or [Open]; end it with [Backend.Close].
type Backend struct {
	cli      *clientv3.Client
	ownsCli  bool // Open made the client: Close closes it
	keys     layout
	maxLease time.Duration
	logger   *slog.Logger
	clock    bool // WithLocalClock

	closed   atomic.Bool
	mu       sync.Mutex
	sessions map[*session]struct{}
	gen      generation // the prefix's generation, as last read; zero until then

	highest atomic.Int64 // the highest token seen, the floor of a new prefix
	raised  sync.Once    // the warning that the server raised a TTL
}

// clockBackend is a Backend opened with WithLocalClock: it adds
// backends.StoreClock.
type clockBackend struct{ *Backend }

var (
	_ backends.Backend    = (*Backend)(nil)
	_ backends.Inspector  = (*Backend)(nil)
	_ backends.StoreClock = clockBackend{}
)

// StoreTime returns this process's wall clock after one read of the
// prefix's meta key, so that it fails while etcd cannot be reached: etcd
// has no clock a client can read, and [WithLocalClock] stands in for one
// (see "Schedules and the store clock" in the package documentation).
func (c clockBackend) StoreTime(ctx context.Context) (time.Time, error) {
	const op = "store time"
	if c.closed.Load() {
		return time.Time{}, c.closedErr(op, "")
	}
	// One read, so that the clock fails as the store does (B5).
	if _, err := c.cli.Get(ctx, c.keys.meta(), clientv3.WithCountOnly()); err != nil {
		return time.Time{}, unavailable(ctx, op, "", err)
	}
	return time.Now(), nil
}

// Option configures a [Backend].
type Option func(*options)

type options struct {
	prefix   string
	maxLease time.Duration
	logger   *slog.Logger
	clock    bool
	readOnly bool
	client   clientOptions // Open only
}

// WithPrefix sets the key prefix under which the backend keeps every key:
// backends with different prefixes share nothing. A prefix without a
// trailing "/" gets one. The default is [DefaultPrefix].
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithMaxLease sets the longest session time to live the backend grants:
// longer requests are clamped to it, and the reply says what was granted
// (C2). It is also the amnesia guard's lock-delay: a prefix created anew
// grants no lease until d has passed (see the package documentation).
// Every node of a prefix must use the same value. etcd counts leases in
// whole seconds: d must be at least a second. The default is
// [DefaultMaxLease].
func WithMaxLease(d time.Duration) Option { return func(o *options) { o.maxLease = d } }

// WithLogger sets the logger for the backend's warnings (a prefix created
// under the amnesia guard, a server that raised a time to live). The
// default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithLocalClock gives the backend a [backends.StoreClock] whose time is
// this process's wall clock, so that schedules run on etcd: hand
// [Backend.Backend] to runtime.NewClient. etcd has no clock a client can
// read; read "Schedules and the store clock" in the package documentation
// for what a node's clock costs. Without it, schedules refuse to start on
// this backend.
func WithLocalClock() Option { return func(o *options) { o.clock = true } }

// New returns a backend on cli, an etcd client the caller made and keeps:
// [Backend.Close] never closes it. It makes no call: the prefix's layout is
// created by the first session opened. The client must not be closed
// before the backend.
//
// The client's own keep-alive loop is never used: each session renews its
// lease only in KeepAlive, one request per call (see the package
// documentation).
//
// Hand [Backend.Backend] to runtime.NewClient: it is b itself, or, with
// [WithLocalClock], b with a store clock.
func New(cli *clientv3.Client, opts ...Option) (*Backend, error) {
	return newBackendOpts(cli, false, opts)
}

func newBackendOpts(cli *clientv3.Client, owns bool, opts []Option) (*Backend, error) {
	o := options{prefix: DefaultPrefix, maxLease: DefaultMaxLease}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return newFromOptions(cli, owns, o)
}

// validate checks the options that do not concern the client.
func (o *options) validate() error {
	if err := validPrefix(o.prefix); err != nil {
		return err
	}
	if o.maxLease < time.Second {
		return fmt.Errorf("simbaetcd: WithMaxLease(%v): want at least 1s, since etcd counts leases in whole seconds", o.maxLease)
	}
	return nil
}

func newFromOptions(cli *clientv3.Client, owns bool, o options) (*Backend, error) {
	if cli == nil {
		return nil, errors.New("simbaetcd: New: nil client")
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(o.prefix, "/") {
		o.prefix += "/"
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{
		cli:      cli,
		ownsCli:  owns,
		keys:     layout{p: o.prefix},
		maxLease: o.maxLease,
		logger:   o.logger,
		clock:    o.clock,
		sessions: make(map[*session]struct{}),
	}, nil
}

// Backend returns b as the backends.Backend to hand to runtime.NewClient:
// b itself, or, with [WithLocalClock], b with a [backends.StoreClock].
func (b *Backend) Backend() backends.Backend {
	if b.clock {
		return clockBackend{b}
	}
	return b
}

func validPrefix(p string) error {
	bad := func(why string) error { return fmt.Errorf("simbaetcd: WithPrefix(%q): %s", p, why) }
	switch {
	case p == "" || p == "/":
		return bad("want a prefix of the backend's own, such as /simba/")
	case len(p) > 512:
		return bad("want at most 512 bytes")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("control characters are not allowed")
		}
	}
	return nil
}

// Prefix returns the key prefix, with its trailing "/".
func (b *Backend) Prefix() string { return b.keys.p }

// MaxLease returns the longest time to live the backend grants, which is
// also its amnesia guard's lock-delay.
func (b *Backend) MaxLease() time.Duration { return b.maxLease }

// Client returns the etcd client the backend uses.
func (b *Backend) Client() *clientv3.Client { return b.cli }

// Close revokes the lease of every session the backend opened — etcd then
// deletes their leases and memberships at once, waking watchers — stops
// their watches, closes the client if [Open] made it, and makes every
// later call fail with [backends.ErrClosed]. It waits up to a few seconds
// for the revocations. Closing twice returns nil.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.mu.Lock()
	ss := make([]*session, 0, len(b.sessions))
	for s := range b.sessions {
		ss = append(ss, s)
	}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			s.end(ctx, true)
		})
	}
	wg.Wait()
	if b.ownsCli {
		return b.cli.Close()
	}
	return nil
}

func (b *Backend) closedErr(op, name string) error {
	return fmt.Errorf("%s: %w", opName(op, name), backends.ErrClosed)
}

// opName is the start of every error message: `simbaetcd: acquire "name"`.
func opName(op, name string) string {
	if name == "" {
		return "simbaetcd: " + op
	}
	return "simbaetcd: " + op + " " + strconv.Quote(name)
}

// unavailable wraps a driver error (storeerr).
func unavailable(ctx context.Context, op, name string, err error) error {
	return storeerr.Unavailable(ctx, "simbaetcd", strings.TrimPrefix(opName(op, name), "simbaetcd: "), err)
}

// generation is what a session needs from the prefix's meta key: its
// creation revision, rev0, which identifies it (a prefix deleted and
// created again is another generation), and the token base.
type generation struct {
	rev0 int64 // the meta key's CreateRevision
	base int64 // tokens are base + (CreateRevision − rev0)
}

func (g generation) token(createRev int64) backends.Token {
	return backends.Token(g.base + createRev - g.rev0)
}

// revision is the inverse of token: the CreateRevision of the lease key of
// token t, or -1, which no key has, if t cannot be one of this generation.
func (g generation) revision(t backends.Token) int64 {
	if int64(t) <= g.base {
		return -1
	}
	return int64(t) - g.base + g.rev0
}

// metaData is the meta key's value: the layout version and the token base
// its creator chose.
func metaData(base int64) string {
	return fmt.Sprintf("%s\nbase=%d\n", layoutVersion, base)
}

// parseMeta reads a meta key.
func (b *Backend) parseMeta(value []byte, createRev int64) (generation, error) {
	lines := strings.Split(string(value), "\n")
	if lines[0] != layoutVersion {
		first := lines[0]
		if len(first) > 40 {
			first = first[:40] + "…"
		}
		return generation{}, fmt.Errorf("simbaetcd: prefix %s holds %q, not this package's layout %q: %w",
			b.keys.p, first, layoutVersion, ErrLayout)
	}
	g := generation{rev0: createRev}
	for _, l := range lines[1:] {
		if v, ok := strings.CutPrefix(l, "base="); ok {
			g.base, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if g.base <= 0 {
		return generation{}, fmt.Errorf("simbaetcd: prefix %s: the meta key has no token base: %w", b.keys.p, ErrLayout)
	}
	return g, nil
}

// generation returns the prefix's generation, reading the meta key, and
// creating it with the amnesia guard if it is missing (unless readOnly).
func (b *Backend) generation(ctx context.Context, op string, fresh bool) (generation, error) {
	b.mu.Lock()
	g := b.gen
	b.mu.Unlock()
	if g.rev0 != 0 && !fresh {
		return g, nil
	}
	resp, err := b.cli.Get(ctx, b.keys.meta())
	if err != nil {
		return generation{}, unavailable(ctx, op, "", err)
	}
	if len(resp.Kvs) == 0 {
		if g, err = b.createMeta(ctx, op); err != nil {
			return generation{}, err
		}
	} else if g, err = b.parseMeta(resp.Kvs[0].Value, resp.Kvs[0].CreateRevision); err != nil {
		return generation{}, err
	}
	b.mu.Lock()
	b.gen = g
	b.mu.Unlock()
	return g, nil
}

// createMeta creates the meta key and the amnesia guard in one
// transaction: the guard is a key on a lease of MaxLease, and no lease is
// granted while it exists. The token base is the clock in microseconds,
// or above the highest token this process has seen, if higher.
func (b *Backend) createMeta(ctx context.Context, op string) (generation, error) {
	guardTTL := int64(math.Ceil(b.maxLease.Seconds()))
	gl, err := b.cli.Grant(ctx, guardTTL)
	if err != nil {
		return generation{}, unavailable(ctx, op, "", err)
	}
	base := max(time.Now().UnixMicro(), b.highest.Load()+1)
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(b.keys.meta()), "=", 0)).
		Then(clientv3.OpPut(b.keys.meta(), metaData(base)),
			clientv3.OpPut(b.keys.guard(), "", clientv3.WithLease(gl.ID))).
		Else(clientv3.OpGet(b.keys.meta())).
		Commit()
	if err != nil {
		return generation{}, unavailable(ctx, op, "", err)
	}
	if !resp.Succeeded {
		// Another node created it first: its guard stands.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		b.cli.Revoke(rctx, gl.ID)
		cancel()
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return generation{}, unavailable(ctx, op, "", errors.New("the meta key was deleted as it was created; try again"))
		}
		return b.parseMeta(kvs[0].Value, kvs[0].CreateRevision)
	}
	b.logger.Warn("simbaetcd: created the prefix; no lease is granted until the amnesia guard has passed, in case it replaces a prefix etcd lost",
		slog.String("prefix", b.keys.p), slog.Duration("guard", time.Duration(guardTTL)*time.Second))
	return generation{rev0: resp.Header.Revision, base: base}, nil
}

// forget drops the cached generation, so that the next session reads it.
func (b *Backend) forget(g generation) {
	b.mu.Lock()
	if b.gen == g {
		b.gen = generation{}
	}
	b.mu.Unlock()
}

// noteToken raises the highest token seen.
func (b *Backend) noteToken(t backends.Token) {
	for {
		h := b.highest.Load()
		if int64(t) <= h || b.highest.CompareAndSwap(h, int64(t)) {
			return
		}
	}
}
