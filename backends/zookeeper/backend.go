package simbazk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/check"
	"github.com/simba-go/simba/backends/internal/guardlog"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// DefaultRoot is the root path of a [Backend] unless [WithRoot] says
// otherwise.
const DefaultRoot = "/simba"

// DefaultMaxLease is the longest session time to live a [Backend] asks
// ZooKeeper for unless [WithMaxLease] says otherwise. It is also the
// amnesia guard's lock-delay.
const DefaultMaxLease = 60 * time.Second

// DefaultTickTime is the servers' tickTime a [Backend] assumes unless
// [WithTickTime] says otherwise: the tickTime of ZooKeeper's sample
// configuration.
const DefaultTickTime = 2 * time.Second

// args checks the arguments of the backend's operations.
var args = check.For("simbazk")

// ErrLayout reports a root node written by an incompatible version of this
// package (or by something else), so that two versions never share a root
// silently. Use another root.
var ErrLayout = errors.New("simbazk: incompatible layout under the root")

// ErrNotAuthorized reports that ZooKeeper refused an operation for want of
// an ACL right (zk.ErrNoAuth): the digest credentials ([WithDigest]) are
// wrong or missing, or the ACLs of the root's nodes were set by someone
// else. The backend never retries it.
var ErrNotAuthorized = errors.New("simbazk: not authorized by ZooKeeper's ACLs")

// Backend is a Simba store in ZooKeeper: it implements [backends.Backend],
// [backends.StoreClock], [backends.Inspector] and io.Closer, and the
// sessions it opens implement [backends.Session] and [backends.Notifier].
// Every session is one ZooKeeper session on a connection of its own. It is
// safe for concurrent use. Create it with [New] or [Open]; end it with
// [Backend.Close].
type Backend struct {
	servers  []string
	root     string
	paths    layout
	maxLease time.Duration
	tick     time.Duration // 0: unknown (see WithTickTime)
	dialCap  time.Duration // 0: a quarter of the session timeout
	dial     Dialer
	logger   *slog.Logger
	digest   string   // "user:password", or ""
	acl      []zk.ACL // of every node the backend creates
	zlog     zk.Logger
	readOnly bool // WithReadOnly: Inspect only, writing nothing

	closed   atomic.Bool
	closing  chan struct{} // closed by Close: sessions stop waiting to close on the server
	mu       sync.Mutex
	sessions map[*session]struct{}
	gen      generation // the root's generation, as last read
	admin    *adminConn

	highest  atomic.Int64 // the highest token seen, the floor of a new root
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
	root     string
	maxLease time.Duration
	tick     time.Duration
	tickSet  bool
	dialCap  time.Duration
	dial     Dialer
	logger   *slog.Logger
	user     string
	password string
	digest   bool
	readOnly bool
}

// WithRoot sets the root path under which the backend keeps every node
// (go-zookeeper has no chroot): an absolute path such as "/simba" or
// "/apps/billing/simba", not "/" and not under "/zookeeper". Backends with
// different roots share nothing. The default is [DefaultRoot].
func WithRoot(path string) Option { return func(o *options) { o.root = path } }

// WithMaxLease sets the longest session time to live the backend asks for:
// longer requests are clamped to it, and the reply says what was granted
// (C2). It is also the amnesia guard's lock-delay: a root created anew
// grants no lease until d has passed on the store's clock (see the package
// documentation). Every node of a root must use the same value. It must be
// at least a millisecond. The default is [DefaultMaxLease].
func WithMaxLease(d time.Duration) Option { return func(o *options) { o.maxLease = d } }

// WithTickTime tells the backend the servers' tickTime, which bounds how
// late a follower tells the leader that a session is alive (B1): every
// renewal reports the session's remaining time less up to one tick. Too
// large is safe (renewals report less); too small is not. The default is
// [DefaultTickTime], and the backend never assumes more than half the
// negotiated session timeout (ZooKeeper grants at least two ticks unless
// minSessionTimeout says otherwise). Where the tick is small beside the
// lease, the backend also asks ZooKeeper for a session a tick shorter than
// the lease, so that a crashed holder's leases are free within the lease
// (see "Crash fail-over" in the package documentation).
func WithTickTime(d time.Duration) Option {
	return func(o *options) { o.tick, o.tickSet = d, true }
}

// WithDialer sets how the backend dials a server (the default is
// net.DialTimeout), for a proxy, TLS or a test's faulty network. The backend
// wraps it: it still bounds the dial timeout and the connect handshake (see
// [WithDialTimeout]) and watches the handshake. It has go-zookeeper's
// dialer signature.
func WithDialer(d Dialer) Option { return func(o *options) { o.dial = d } }

// WithDialTimeout bounds each dial and each connect handshake. The backend
// never waits longer than a quarter of the session timeout anyway, so that a
// server that accepts connections but does not answer (frozen) does not
// cost the session; a shorter bound moves to the next server sooner.
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialCap = d } }

// WithLogger sets the logger for the backend's logs (go-zookeeper's
// connection messages at debug level, the amnesia guard at warn). The
// default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDigest authenticates every connection with ZooKeeper's digest scheme
// as user:password, and gives every node the backend creates the ACL
// "digest user: all rights, anyone: read": only clients with these
// credentials can create, write or delete the backend's nodes — so no other
// client can delete a lease and so take it — while anyone may read who
// holds what. Without it, nodes are open to every client (world:anyone
// all). A wrong password is refused by ZooKeeper at the first write, with an
// error wrapping [ErrNotAuthorized].
func WithDigest(user, password string) Option {
	return func(o *options) { o.user, o.password, o.digest = user, password, true }
}

// WithReadOnly makes a backend that only lists the root ([Backend.Inspect]),
// for status tools: it writes nothing to ZooKeeper — no root, no clock node;
// a root that does not exist lists as empty — and OpenSession and StoreTime
// fail with [ErrReadOnly]. Its Inspect reports no store time: ZooKeeper's
// clock can be read only through a write.
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// ErrReadOnly reports a session or a store time asked of a backend made with
// [WithReadOnly].
var ErrReadOnly = errors.New("simbazk: backend opened read-only")

// New returns a backend for the ZooKeeper servers (host:port each; one
// ensemble). It makes no connection: each session connects on its own, and
// the backend connects for [Backend.StoreTime] and [Backend.Inspect] when
// first asked. Call [Backend.Close] when done.
func New(servers []string, opts ...Option) (*Backend, error) {
	o := options{root: DefaultRoot, maxLease: DefaultMaxLease, tick: DefaultTickTime}
	for _, opt := range opts {
		opt(&o)
	}
	if len(servers) == 0 {
		return nil, errors.New("simbazk: New: no servers; want host:port[,host:port…]")
	}
	var list []string
	for _, s := range servers {
		s = strings.TrimSpace(s)
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("simbazk: New: server %q: want host:port: %w", s, err)
		}
		list = append(list, s)
	}
	if err := validRoot(o.root); err != nil {
		return nil, err
	}
	if o.maxLease < time.Millisecond {
		return nil, fmt.Errorf("simbazk: WithMaxLease(%v): want at least 1ms", o.maxLease)
	}
	if o.tickSet && o.tick <= 0 {
		return nil, fmt.Errorf("simbazk: WithTickTime(%v): want a positive duration", o.tick)
	}
	if o.dialCap < 0 {
		return nil, fmt.Errorf("simbazk: WithDialTimeout(%v): want a positive duration", o.dialCap)
	}
	if o.digest && (o.user == "" || strings.Contains(o.user, ":")) {
		return nil, errors.New("simbazk: WithDigest: the user name must be non-empty and without ':'")
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.dial == nil {
		o.dial = net.DialTimeout
	}
	b := &Backend{
		servers:  list,
		root:     o.root,
		paths:    layout{root: o.root},
		maxLease: o.maxLease,
		tick:     o.tick,
		dialCap:  o.dialCap,
		dial:     o.dial,
		logger:   o.logger,
		acl:      zk.WorldACL(zk.PermAll),
		zlog:     zkLogger{o.logger},
		readOnly: o.readOnly,
		sessions: make(map[*session]struct{}),
		closing:  make(chan struct{}),
	}
	if o.digest {
		b.digest = o.user + ":" + o.password
		b.acl = append(zk.DigestACL(zk.PermAll, o.user, o.password), zk.WorldACL(zk.PermRead)...)
	}
	return b, nil
}

func validRoot(p string) error {
	bad := func(why string) error { return fmt.Errorf("simbazk: WithRoot(%q): %s", p, why) }
	switch {
	case !strings.HasPrefix(p, "/"):
		return bad("want an absolute path such as /simba")
	case p == "/":
		return bad(`"/" is ZooKeeper's own root; want a path of the backend's own, such as /simba`)
	case strings.HasSuffix(p, "/"):
		return bad("want no trailing /")
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return bad("/zookeeper is reserved by ZooKeeper")
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad(fmt.Sprintf("segment %q; want no empty, . or .. segments", seg))
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f {
				return bad("control characters are not allowed")
			}
		}
	}
	return nil
}

// Servers returns the servers the backend connects to.
func (b *Backend) Servers() []string { return append([]string(nil), b.servers...) }

// Root returns the root path.
func (b *Backend) Root() string { return b.root }

// MaxLease returns the longest time to live the backend asks for, which is
// also its amnesia guard's lock-delay.
func (b *Backend) MaxLease() time.Duration { return b.maxLease }

// Close closes every session the backend opened — ZooKeeper then deletes
// their leases and memberships at once, waking watchers — and its own
// connection, and makes every later call fail with [backends.ErrClosed]. It
// waits up to a second or so per session for the connections to end.
// Closing twice returns nil.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	close(b.closing)
	b.mu.Lock()
	ss := make([]*session, 0, len(b.sessions))
	for s := range b.sessions {
		ss = append(ss, s)
	}
	admin := b.admin
	b.admin = nil
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			s.end(fmt.Errorf("%w (%w)", backends.ErrClosed, backends.ErrSessionExpired))
			s.waitGone(5 * time.Second)
		})
	}
	if admin != nil {
		wg.Go(func() { admin.close() })
	}
	wg.Wait()
	return nil
}

func (b *Backend) closedErr(op, name string) error {
	return fmt.Errorf("%s: %w", opName(op, name), backends.ErrClosed)
}

// opName is the start of every error message: `simbazk: acquire "name"`.
func opName(op, name string) string {
	if name == "" {
		return "simbazk: " + op
	}
	return "simbazk: " + op + " " + strconv.Quote(name)
}

// unavailable wraps a driver error (storeerr), naming the servers when no
// connection could be made.
func (b *Backend) unavailable(ctx context.Context, op, name string, err error) error {
	return storeerr.Unavailable(ctx, "simbazk", strings.TrimPrefix(opName(op, name), "simbazk: "), err)
}

// lag is how long a session's touch may take to reach the leader (B1):
// one tick (a follower reports touches every half tick, and the leader's
// round of pings may run late by up to another half), and never more than
// half the session timeout.
func (b *Backend) lag(timeout time.Duration) time.Duration {
	return min(b.tick, timeout/2)
}

// sessionTimeout is the session timeout the backend asks ZooKeeper for a
// lease of ttl: ttl less a tick where each renewal's Remaining (B1) then
// stays at least three quarters of ttl — a tick of at most a quarter of ttl
// with one server configured (taken as standalone), at most an eighth with
// several — and ttl otherwise. Why: "Crash fail-over" in the package
// documentation.
func (b *Backend) sessionTimeout(ttl time.Duration) time.Duration {
	limit := ttl / 8
	if len(b.servers) == 1 {
		limit = ttl / 4
	}
	if b.tick <= limit {
		return ttl - b.tick
	}
	return ttl
}

// dialBound is the bound of each dial and handshake for a session timeout.
func (b *Backend) dialBound(timeout time.Duration) time.Duration {
	d := max(timeout/4, 50*time.Millisecond)
	if b.dialCap > 0 {
		d = min(d, b.dialCap)
	}
	return d
}

// connect opens a *zk.Conn with the backend's dialer, auth and logger; cb
// receives every event. It does not wait for the session.
func (b *Backend) connect(timeout time.Duration, w *wire, cb zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
	return zk.Connect(b.servers, timeout,
		zk.WithDialer(w.Dial),
		zk.WithHostProvider(w),
		zk.WithEventCallback(cb),
		zk.WithLogger(b.zlog),
		zk.WithLogInfo(false),
		zk.WithMaxBufferSize(4<<20))
}

// zkLogger sends go-zookeeper's messages to the backend's logger at debug
// level: they are about connections, which the backend reports itself.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, a ...any) {
	z.l.Debug("simbazk: go-zookeeper: " + fmt.Sprintf(format, a...))
}

// StoreTime returns the store's clock: the mtime of a write of the root's
// clock node, which the leader stamps (one round trip, on the backend's own
// connection; B5: ZooKeeper's clock has milliseconds, and it is the
// leader's, so it may step when the leader changes).
func (b *Backend) StoreTime(ctx context.Context) (time.Time, error) {
	const op = "store time"
	if b.readOnly {
		return time.Time{}, fmt.Errorf("simbazk: %s: %w", op, ErrReadOnly)
	}
	var st *zk.Stat
	write := func(c *zk.Conn) error {
		var err error
		st, err = c.Set(b.paths.clock(), nil, -1)
		return err
	}
	err := b.adminDo(ctx, op, write)
	if errors.Is(err, zk.ErrNoNode) {
		err = b.adminDo(ctx, op, func(c *zk.Conn) error {
			if err := b.ensureLayout(c); err != nil {
				return err
			}
			return write(c)
		})
	}
	if err != nil {
		return time.Time{}, b.adminErr(ctx, op, err)
	}
	return time.UnixMilli(st.Mtime).UTC(), nil
}
