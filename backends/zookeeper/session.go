package simbazk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
)

// session is one Simba session: one ZooKeeper session on a *zk.Conn of its
// own. Every call runs on a goroutine of its own, bounded by the caller's
// context (go-zookeeper's calls take none): the caller returns when its
// context ends, and the call finishes on its own when ZooKeeper answers or
// the connection closes.
type session struct {
	b        *Backend
	id       string
	identity []byte
	conn     *zk.Conn
	w        *wire
	gen      generation
	paths    layout

	ready     chan struct{} // closed at the first StateHasSession
	readyOnce sync.Once
	up        chan struct{} // closed while connected with the session; guarded by mu
	dead      chan struct{} // closed when the session ended
	endOnce   sync.Once
	endErr    error         // why it ended, set before dead is closed
	gone      chan struct{} // closed when go-zookeeper's goroutines have ended

	mu        sync.Mutex
	held      map[string]heldLease
	joined    map[string]int // group → partitions
	leaveRev  int64          // zxid of the session's last leave
	groupsRev int64          // Digest.Groups as last reported
	b2        *time.Timer    // B2: closes the session when renewals stop
	b2At      time.Time      // B2: when it closes, unless a renewal moves it
	b2Lapsed  bool           // B2: the session is closing; no renewal counts
	storeAt   time.Time      // local time when storeTime was read (sent)
	storeTime time.Time      // the store's clock at the last renewal
	releasing map[string]int // own deletes of lease nodes not yet seen as events

	watches watcher
}

// heldLease is a lease the session holds, as the session recorded it (B4).
type heldLease struct {
	token  backends.Token
	holder string // the group holder marker created with it, or ""
}

var (
	_ backends.Session  = (*session)(nil)
	_ backends.Notifier = (*session)(nil)
)

// errExpired is why a session that ZooKeeper expired ended.
var errExpired = fmt.Errorf("ZooKeeper expired the session: %w", backends.ErrSessionExpired)

// OpenSession opens a ZooKeeper session that ZooKeeper expires opts.TTL
// after the last sign of life from its client, with opts.Identity recorded
// in the session's node. A TTL longer than MaxLease is clamped to it, and
// ZooKeeper clamps it again to its [minSessionTimeout, maxSessionTimeout];
// the reply's Remaining is the negotiated timeout, counted from the call
// (the leader created the session after it started). It connects to the
// servers, so it takes a handshake and three round trips (one more with
// [WithDigest]). While no server answers it waits until ctx ends, then
// fails with an error wrapping [backends.ErrUnavailable] that names the
// servers tried and their dial errors.
func (b *Backend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if b.closed.Load() {
		return nil, backends.Renewal{}, b.closedErr("open session", "")
	}
	if err := args.Session(opts, time.Millisecond); err != nil {
		return nil, backends.Renewal{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, backends.Renewal{}, fmt.Errorf("simbazk: open session: %w", err)
	}
	start := time.Now()
	ttl := min(opts.TTL, b.maxLease)
	s := &session{
		b:         b,
		identity:  []byte(opts.Identity),
		paths:     b.paths,
		ready:     make(chan struct{}),
		up:        make(chan struct{}),
		dead:      make(chan struct{}),
		gone:      make(chan struct{}),
		held:      make(map[string]heldLease),
		joined:    make(map[string]int),
		releasing: make(map[string]int),
	}
	s.watches.s = s
	s.w = newWire(b.dial, b.servers, b.dialBound(ttl), true)
	s.w.onRefused = func() { s.end(errExpired) }
	s.mu.Lock() // the callback may run before Connect returns
	conn, events, err := b.connect(b.sessionTimeout(ttl), s.w, s.event)
	if err != nil {
		s.mu.Unlock()
		return nil, backends.Renewal{}, fmt.Errorf("simbazk: open session: %w", err)
	}
	s.conn = conn
	s.mu.Unlock()
	go func() {
		for range events { // closed when go-zookeeper's loop has ended
		}
		close(s.gone)
	}()
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		s.end(fmt.Errorf("%w (%w)", backends.ErrClosed, backends.ErrSessionExpired))
		return nil, backends.Renewal{}, b.closedErr("open session", "")
	}
	b.sessions[s] = struct{}{}
	b.mu.Unlock()

	fail := func(err error) (backends.Session, backends.Renewal, error) {
		s.end(fmt.Errorf("opening it failed: %w", backends.ErrSessionExpired))
		return nil, backends.Renewal{}, err
	}
	select {
	case <-s.ready:
	case <-s.dead:
		return fail(fmt.Errorf("simbazk: open session: %w", s.endErr))
	case <-ctx.Done():
		why := s.w.dialErrors()
		if why == "" {
			why = "no session established"
		}
		return fail(b.unavailable(ctx, "open session", "",
			fmt.Errorf("no ZooKeeper server of %v answered in time (%s)", b.servers, why)))
	}
	s.id = sessionID(conn.SessionID())
	if b.digest != "" {
		if err := s.do(ctx, "open session", "", func(c *zk.Conn) error { return c.AddAuth("digest", []byte(b.digest)) }); err != nil {
			return fail(s.fail(ctx, "open session", "", err))
		}
	}
	// The session node, its marker, and a write of the clock node, whose
	// creation zxid tells the root's generation (see generationOf).
	var st, clock *zk.Stat
	create := func(c *zk.Conn) error {
		// A container, so that ZooKeeper deletes it once its ephemeral
		// children are gone; created on its own, since go-zookeeper cannot
		// read the reply of a container's creation in a multi. What the
		// server is (B1, see remaining) is read beside it.
		container := func() error {
			_, err := c.CreateContainer(s.paths.session(s.id), s.identity, zk.FlagContainer, b.acl)
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		}
		wc := s.w.current()
		learn, learnt := s.learnServer(wc)
		fns := []func() error{container}
		if learn != nil {
			fns = append(fns, func() error { return learn(c) })
		}
		if err := parallel(fns...); err != nil {
			return err
		}
		if learnt != nil {
			learnt()
		}
		res, err := c.Multi(
			&zk.CreateRequest{Path: s.paths.marker(s.id), Acl: b.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1},
			&zk.SetDataRequest{Path: s.paths.clock(), Version: -1},
		)
		if _, err := multiErr(res, err); err != nil {
			return err
		}
		st, clock = res[1].Stat, res[2].Stat
		return nil
	}
	err = s.do(ctx, "open session", "", create)
	if errors.Is(err, zk.ErrNoNode) {
		err = s.do(ctx, "open session", "", func(c *zk.Conn) error {
			if err := b.ensureLayout(c); err != nil {
				return err
			}
			return create(c)
		})
	}
	if err != nil {
		return fail(s.fail(ctx, "open session", "", err))
	}
	err = s.do(ctx, "open session", "", func(c *zk.Conn) error {
		g, err := b.generationOf(c, clock)
		s.gen = g
		return err
	})
	if err != nil {
		return fail(s.fail(ctx, "open session", "", err))
	}
	timeout := s.w.negotiated()
	if timeout <= 0 {
		timeout = ttl
	}
	// B1: the leader created the session after the call started, and
	// keeps it for the negotiated timeout from then.
	rem := timeout
	s.mu.Lock()
	s.storeAt, s.storeTime = start, time.UnixMilli(st.Mtime)
	s.mu.Unlock()
	if err := s.renewed("open session", start, start.Add(rem)); err != nil {
		return fail(err)
	}
	return s, backends.Renewal{Remaining: rem, StoreTime: time.UnixMilli(st.Mtime).UTC(), Digest: s.digest(st, 0)}, nil
}

func (s *session) ID() backends.SessionID { return backends.SessionID(s.id) }

// event is go-zookeeper's event callback: it must not block.
func (s *session) event(ev zk.Event) {
	if ev.Type == zk.EventSession {
		switch ev.State {
		case zk.StateHasSession:
			s.readyOnce.Do(func() { close(s.ready) })
			s.mu.Lock()
			select {
			case <-s.up:
			default:
				close(s.up)
			}
			s.mu.Unlock()
			s.watches.reconnected()
		case zk.StateExpired:
			s.end(errExpired)
		case zk.StateDisconnected, zk.StateConnecting:
			s.mu.Lock()
			select {
			case <-s.up:
				s.up = make(chan struct{})
			default:
			}
			s.mu.Unlock()
		}
		return
	}
	s.watches.event(ev)
}

// end ends the session once, for the reason err (which wraps
// ErrSessionExpired): calls in progress and later calls fail with it, and
// the connection is closed — ZooKeeper then deletes the session's
// ephemeral nodes — on a goroutine of its own, since go-zookeeper's Close
// may wait a second.
func (s *session) end(err error) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		s.endErr = err
		if s.b2 != nil {
			s.b2.Stop()
		}
		conn := s.conn
		s.mu.Unlock()
		close(s.dead)
		s.b.mu.Lock()
		delete(s.b.sessions, s)
		s.b.mu.Unlock()
		s.watches.close()
		s.w.end()
		if conn != nil {
			go conn.Close()
		}
	})
}

// waitGone waits, at most d, until go-zookeeper's goroutines of the session
// have ended.
func (s *session) waitGone(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.gone:
	case <-t.C:
	}
}

// isDead reports whether the session has ended.
func (s *session) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

func (s *session) deadErr(op, name string) error {
	return fmt.Errorf("%s: session %s: %w", opName(op, name), s.id, s.endErr)
}

// renewed records that a renewal sent at sent succeeded and keeps the
// session alive until deadline (B2): unless a later renewal succeeds by then,
// the session closes itself at deadline, so that go-zookeeper's own pings
// cannot keep it alive past what the engine was told. A renewal sent when the
// last deadline had passed, or answered after the backend decided to close
// the session, does not count: the session ends and renewed reports it, so
// that no caller is told of time the backend is taking away.
func (s *session) renewed(op string, sent, deadline time.Time) error {
	s.mu.Lock()
	if s.lapsedLocked(sent) || s.isDead() {
		s.b2Lapsed = true
		s.mu.Unlock()
		s.end(errB2)
		return s.deadErr(op, "")
	}
	if deadline.After(s.b2At) {
		s.b2At = deadline
	}
	d := time.Until(s.b2At)
	if s.b2 == nil {
		s.b2 = time.AfterFunc(d, s.b2Expired)
	} else {
		s.b2.Reset(d)
	}
	s.mu.Unlock()
	return nil
}

// lapsed reports whether B2 has closed, or is to close, the session at t.
func (s *session) lapsed(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lapsedLocked(t)
}

// lapsedLocked is lapsed, with s.mu held.
func (s *session) lapsedLocked(t time.Time) bool {
	return s.b2Lapsed || (!s.b2At.IsZero() && !t.Before(s.b2At))
}

// b2Expired runs when B2's timer fires: it closes the session unless a
// renewal moved the deadline meanwhile. The decision is taken under the
// session's lock, so a renewal answered at the same moment either moved the
// deadline first or finds the session closing (renewed).
func (s *session) b2Expired() {
	s.mu.Lock()
	if d := time.Until(s.b2At); d > 0 && !s.b2Lapsed {
		s.b2.Reset(d)
		s.mu.Unlock()
		return
	}
	s.b2Lapsed = true
	s.mu.Unlock()
	s.end(errB2)
}

// errB2 is why a session that the backend closed under B2 ended.
var errB2 = fmt.Errorf("no keep-alive succeeded within the remaining time of the last one (B2), so the backend closed it: %w",
	backends.ErrSessionExpired)

// do runs fn on the session's connection, on a goroutine of its own, and
// waits for it until ctx ends or the session ends. It returns fn's error
// unwrapped (ZooKeeper's errors, for the caller to sort), or an error that
// wraps ctx's error, or the session's end.
func (s *session) do(ctx context.Context, op, name string, fn func(c *zk.Conn) error) error {
	if s.b.closed.Load() {
		return s.b.closedErr(op, name)
	}
	if s.isDead() {
		return s.deadErr(op, name)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", opName(op, name), err)
	}
	done := make(chan error, 1)
	go func() { done <- fn(s.conn) }()
	select {
	case err := <-done:
		if err != nil && s.isDead() {
			return s.deadErr(op, name)
		}
		if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) {
			// The connection failed under the call, which may or may not
			// have run, or the call was queued while go-zookeeper had no
			// connection and it gave up on it before its pause between
			// rounds of the servers (a second). Whether the session
			// survived is known once go-zookeeper has reconnected: wait
			// for that, within ctx, so that an expired session is reported
			// as such, at once, rather than at the caller's next retry.
			s.mu.Lock()
			up := s.up
			s.mu.Unlock()
			select {
			case <-up:
			case <-s.dead:
				return s.deadErr(op, name)
			case <-ctx.Done():
			}
		}
		return err
	case <-ctx.Done():
		return s.b.unavailable(ctx, op, name, errors.New("ZooKeeper did not answer in time (the call may still run)"))
	case <-s.dead:
		if s.b.closed.Load() {
			return s.b.closedErr(op, name)
		}
		return s.deadErr(op, name)
	}
}

// fail turns an error of do that the caller did not expect into the
// contract's errors.
func (s *session) fail(ctx context.Context, op, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backends.ErrSessionExpired), errors.Is(err, backends.ErrClosed),
		errors.Is(err, backends.ErrUnavailable), errors.Is(err, ctx.Err()) && ctx.Err() != nil:
		return err // already ours
	case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, wireErrNewSession):
		s.end(errExpired)
		return s.deadErr(op, name)
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("%s: ZooKeeper refused it under %s (check WithDigest's credentials and the ACLs of the root's nodes): %w: %w",
			opName(op, name), s.b.root, ErrNotAuthorized, err)
	case errors.Is(err, ErrLayout):
		return fmt.Errorf("%s: %w", opName(op, name), err)
	}
	return s.b.unavailable(ctx, op, name, err)
}

// lost ends the session because its node is gone (an operator deleted it,
// or the store lost it).
func (s *session) lost(op, name string) error {
	s.end(fmt.Errorf("its node %s is gone: %w", s.paths.session(s.id), backends.ErrSessionExpired))
	return s.deadErr(op, name)
}

// apiErrors are the errors ZooKeeper reports for the operation of a multi
// that failed it; the others report "runtime inconsistency".
var apiErrors = []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrBadVersion, zk.ErrNoAuth, zk.ErrNotEmpty,
	zk.ErrNoChildrenForEphemerals, zk.ErrInvalidACL, zk.ErrSessionExpired, zk.ErrBadArguments, zk.ErrSessionMoved}

// multiErr returns the index and error of the operation that failed a
// multi, or -1 and the multi's error if none says.
func multiErr(res []zk.MultiResponse, err error) (int, error) {
	if err == nil {
		return -1, nil
	}
	for i, r := range res {
		for _, e := range apiErrors {
			if r.Error == e {
				return i, e
			}
		}
	}
	return -1, err
}

// digest reads the session node's Stat: its children are the marker and
// the leases held, and its cversion rises by one per child created or
// deleted, that is, per lease acquired or released.
func (s *session) digest(st *zk.Stat, groups int64) backends.Digest {
	return backends.Digest{Leases: int(st.NumChildren) - 1, Version: uint64(st.Cversion), Groups: uint64(groups)}
}

// KeepAlive renews the session: a write of the session node, which goes
// through the leader (so it fails when the connected server cannot reach a
// quorum), and for each group joined a read of the group node's Stat,
// pipelined with it. Its cost does not grow with the number of leases held.
//
// Remaining follows B1: the negotiated session timeout from the latest
// touch of the session that the leader has surely seen (see remaining),
// counted from the call: the timeout less a tick, or less the time since the
// connection's previous write if that is longer (at most half the timeout
// on an idle connection, which the wire pings).
func (s *session) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	t0 := time.Now()
	if s.lapsed(t0) {
		// B2's deadline has passed and its timer has not run yet: the
		// session is closed now, and this write is never sent.
		s.b2Expired()
		return backends.Renewal{}, s.deadErr("keep-alive", "")
	}
	var st *zk.Stat
	groups := s.joinedGroups()
	pz := make([]int64, len(groups))
	wc := s.w.current()
	learn, learnt := s.learnServer(wc)
	err := s.do(ctx, "keep-alive", "", func(c *zk.Conn) error {
		fns := append([]func() error{func() error {
			var err error
			st, err = c.Set(s.paths.session(s.id), s.identity, -1)
			return err
		}}, s.groupReads(c, groups, pz)...)
		if learn != nil {
			fns = append(fns, func() error { return learn(c) })
		}
		return parallel(fns...)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Renewal{}, s.lost("keep-alive", "")
	}
	if err != nil {
		return backends.Renewal{}, s.fail(ctx, "keep-alive", "", err)
	}
	if learnt != nil {
		learnt()
	}
	rem := s.remaining(t0, wc)
	if err := s.renewed("keep-alive", t0, t0.Add(rem)); err != nil {
		return backends.Renewal{}, err
	}
	s.mu.Lock()
	s.storeAt, s.storeTime = t0, time.UnixMilli(st.Mtime)
	g := s.groupsDigest(pz)
	s.mu.Unlock()
	return backends.Renewal{Remaining: rem, StoreTime: time.UnixMilli(st.Mtime).UTC(), Digest: s.digest(st, g)}, nil
}

// remaining is B1's bound for a renewal sent at t0 that succeeded, on the
// connection wc that was current when it was sent: the negotiated timeout
// from the latest touch the leader has surely seen, counted from t0.
//
// On a standalone server, which is the leader of its own sessions, that
// touch is the renewal itself, received after t0: the whole timeout. The
// backend knows the server is standalone only if it read so on wc, and wc
// is still the current connection (no handshake since, so the renewal went
// over wc).
//
// Otherwise that touch is the latest write on the connection at least a lag
// before t0 (a follower reports touches to the leader every half tick, so
// those have reached it by the time a write sent after them went through
// the leader), or the connection's handshake, which the leader handles
// itself, if later — even after t0, when the renewal waited for a
// reconnection.
func (s *session) remaining(t0 time.Time, wc *wireConn) time.Duration {
	timeout := s.w.negotiated()
	if wc != nil && s.w.current() == wc && serverKind(wc.kind.Load()) == kindStandalone {
		return timeout
	}
	lag := s.b.lag(timeout)
	touched, ok := s.w.touchedBefore(t0.Add(-lag))
	if !ok {
		touched = t0.Add(-lag)
	}
	return max(touched.Add(timeout).Sub(t0), time.Millisecond)
}

// configPath is ZooKeeper's configuration node (3.5 and later): empty on a
// standalone server, the ensemble's members on a member of an ensemble.
const configPath = "/zookeeper/config"

// learnServer returns, if what the server behind wc is is not known yet, a
// read of its configuration node to pipeline with a call, and learnt, to
// call once that call succeeded: it records the server's kind on wc if no
// handshake happened since wc was current, so that the read went over wc
// (connections only ever become current in turn; a call queued while
// go-zookeeper reconnects goes over the next one, which becomes current
// first). The read never fails the call it goes with. Both are nil when
// there is nothing to learn.
func (s *session) learnServer(wc *wireConn) (read func(c *zk.Conn) error, learnt func()) {
	if wc == nil || serverKind(wc.kind.Load()) != kindUnknown {
		return nil, nil
	}
	var kind serverKind
	read = func(c *zk.Conn) error {
		data, _, err := c.Get(configPath)
		switch {
		case err == nil && len(data) == 0:
			kind = kindStandalone
		case err == nil:
			kind = kindEnsemble
		case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrClosing):
			// Not known: the next call reads it again.
		default:
			kind = kindEnsemble // a server too old to have the node, or one that will not tell
		}
		return nil
	}
	learnt = func() {
		if kind != kindUnknown && s.w.current() == wc {
			wc.kind.CompareAndSwap(int32(kindUnknown), int32(kind))
		}
	}
	return read, learnt
}

// parallel runs fns concurrently (go-zookeeper pipelines them on the
// connection) and returns the first error, in the order of fns.
func parallel(fns ...func() error) error {
	if len(fns) == 1 {
		return fns[0]()
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// joinedGroups returns the groups the session joined, sorted.
func (s *session) joinedGroups() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := make([]string, 0, len(s.joined))
	for g := range s.joined {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	return gs
}

// groupReads returns reads of each group node's pzxid into pz: the zxid of
// its last child change (a member joining, leaving or ending, a partition
// changing holder).
func (s *session) groupReads(c *zk.Conn, groups []string, pz []int64) []func() error {
	fns := make([]func() error, len(groups))
	for i, g := range groups {
		fns[i] = func() error {
			ok, st, err := c.Exists(s.paths.group(g))
			if err == nil && ok {
				pz[i] = st.Pzxid
			}
			return err
		}
	}
	return fns
}

// groupsDigest is Digest.Groups: the largest of the joined groups' pzxids
// and of the zxid of the session's last leave (B3). Called with s.mu held.
func (s *session) groupsDigest(pz []int64) int64 {
	g := s.leaveRev
	for _, z := range pz {
		g = max(g, z)
	}
	s.groupsRev = g
	return g
}

// knownGroups is Digest.Groups as last read, for the replies of Acquire and
// Release, raised to rev if the call changed a joined group.
func (s *session) knownGroups(rev int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupsRev = max(s.groupsRev, rev)
	return s.groupsRev
}

// Owned lists the session node's children (one read, with the digest of
// the same instant); tokens come from the session's own record, or, for a
// lease it did not know it held (an acquisition whose reply was lost), from
// the creation zxid of its child node, read for those only.
func (s *session) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	var (
		children []string
		st       *zk.Stat
	)
	groups := s.joinedGroups()
	pz := make([]int64, len(groups))
	err := s.do(ctx, "owned", "", func(c *zk.Conn) error {
		return parallel(append([]func() error{func() error {
			var err error
			children, st, err = c.Children(s.paths.session(s.id))
			return err
		}}, s.groupReads(c, groups, pz)...)...)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, backends.Digest{}, s.lost("owned", "")
	}
	if err != nil {
		return nil, backends.Digest{}, s.fail(ctx, "owned", "", err)
	}
	held := make([]backends.Held, 0, len(children))
	var unknown []string
	s.mu.Lock()
	for _, name := range children {
		if name == markerName {
			continue
		}
		if h, ok := s.held[name]; ok {
			held = append(held, backends.Held{Name: name, Token: h.token})
		} else {
			unknown = append(unknown, name)
		}
	}
	s.mu.Unlock()
	if len(unknown) > 0 {
		czxids := make([]int64, len(unknown))
		err := s.do(ctx, "owned", "", func(c *zk.Conn) error {
			fns := make([]func() error, len(unknown))
			for i, name := range unknown {
				fns[i] = func() error {
					ok, st, err := c.Exists(s.paths.owned(s.id, name))
					if err == nil && ok {
						czxids[i] = st.Czxid
					}
					return err
				}
			}
			return parallel(fns...)
		})
		if err != nil {
			return nil, backends.Digest{}, s.fail(ctx, "owned", "", err)
		}
		s.mu.Lock()
		for i, name := range unknown {
			if czxids[i] > 0 {
				tok := backends.Token(s.gen.base + czxids[i])
				s.held[name] = heldLease{token: tok}
				held = append(held, backends.Held{Name: name, Token: tok})
			}
		}
		s.mu.Unlock()
	}
	// Leases the session recorded but no longer holds (deleted behind its
	// back) are forgotten.
	s.mu.Lock()
	for name := range s.held {
		if !slices.Contains(children, name) {
			delete(s.held, name)
		}
	}
	g := s.groupsDigest(pz)
	s.mu.Unlock()
	slices.SortFunc(held, func(a, b backends.Held) int { return cmp.Compare(a.Name, b.Name) })
	return held, s.digest(st, g), nil
}

// storeNow estimates the store's clock now from the last renewal, or
// returns false.
func (s *session) storeNow() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.storeTime.IsZero() {
		return time.Time{}, false
	}
	return s.storeTime.Add(time.Since(s.storeAt)), true
}

func (s *session) recovering(name string, wait time.Duration) error {
	s.b.logger.Warn("simbazk: the root is new or was created again (ZooKeeper may have lost its data); no lease is granted until the amnesia guard has passed",
		"root", s.b.root, "remaining", wait)
	return fmt.Errorf("%s: the root %s is new or was created again (ZooKeeper may have lost its data): %w, no grants for another %v: %w",
		opName("acquire", name), s.b.root, backends.ErrRecovering, wait.Round(time.Millisecond), backends.ErrLeaseHeld)
}

// Acquire creates the lease node (ephemeral), the session's child for it
// and, for a partition of a group with members, the group's holder marker,
// and writes the session node, in one multi whose reply gives the token
// (the transaction's zxid, which is the lease node's czxid) and the digest;
// then it reads the value node. Two round trips (B6). A lease held by
// another session is read to name its holder.
func (s *session) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	const op = "acquire"
	if err := args.Name(op, name); err != nil {
		return backends.Grant{}, err
	}
	if now, ok := s.storeNow(); ok && now.Before(s.gen.guardEnd) {
		if s.b.closed.Load() {
			return backends.Grant{}, s.b.closedErr(op, name)
		}
		return backends.Grant{}, s.recovering(name, s.gen.guardEnd.Sub(now))
	}
	s.mu.Lock()
	h, mine := s.held[name]
	s.mu.Unlock()
	if mine {
		g, ok, err := s.reacquire(ctx, name, h)
		if err != nil || ok {
			return g, err
		}
	}
	withHolder := true
	// Another session's lease node may vanish between the multi that found
	// it and the read of its holder: then try again, a few times.
	for range 16 {
		holder := ""
		if group, i, ok := backends.SplitPartition(name); ok && withHolder {
			s.mu.Lock()
			n, joined := s.joined[group]
			s.mu.Unlock()
			if !joined || i < n {
				holder = s.paths.holder(group, i, s.id)
			}
		}
		ops := []any{
			&zk.CreateRequest{Path: s.paths.lease(name), Data: leaseData(s.id, string(s.identity)), Acl: s.b.acl, Flags: zk.FlagEphemeral},
			&zk.CreateRequest{Path: s.paths.owned(s.id, name), Acl: s.b.acl, Flags: zk.FlagEphemeral},
		}
		if holder != "" {
			ops = append(ops, &zk.CreateRequest{Path: holder, Acl: s.b.acl, Flags: zk.FlagEphemeral})
		}
		ops = append(ops, &zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
		var (
			st       *zk.Stat
			failed   int
			value    []byte
			valueErr error
			valueOK  bool
		)
		err := s.do(ctx, op, name, func(c *zk.Conn) error {
			// B6: the value node is read in a request pipelined right
			// behind the multi, sent once the multi has been written:
			// ZooKeeper answers a session's requests in order, so the read
			// sees the state after the multi, values its previous holders
			// stored included.
			sent := s.w.awaitWrite(s.paths.lease(name))
			defer s.w.stopAwait(sent)
			type multiResult struct {
				res []zk.MultiResponse
				err error
			}
			mres := make(chan multiResult, 1)
			go func() { res, err := c.Multi(ops...); mres <- multiResult{res, err} }()
			var r multiResult
			read := false
			select {
			case <-sent.sent:
				read = true
			case r = <-mres:
			}
			var vdone chan struct{}
			if read {
				vdone = make(chan struct{})
				go func() {
					defer close(vdone)
					value, _, valueErr = c.Get(s.paths.value(name))
				}()
				r = <-mres
			}
			failed, r.err = multiErr(r.res, r.err)
			if r.err == nil {
				st = r.res[len(r.res)-1].Stat
			}
			if vdone != nil {
				<-vdone
				valueOK = true
			}
			return r.err
		})
		switch {
		case err == nil:
			tok := backends.Token(s.gen.base + st.Mzxid)
			if time.UnixMilli(st.Mtime).Before(s.gen.guardEnd) {
				// Granted within the guard: undo it (best effort).
				s.undo(ctx, name, holder)
				return backends.Grant{}, s.recovering(name, s.gen.guardEnd.Sub(time.UnixMilli(st.Mtime)))
			}
			s.b.noteToken(int64(tok))
			groupsRev := int64(0)
			s.mu.Lock()
			s.held[name] = heldLease{token: tok, holder: holder}
			if holder != "" {
				group, _, _ := backends.SplitPartition(name)
				if _, ok := s.joined[group]; ok {
					groupsRev = st.Mzxid
				}
			}
			s.storeAt, s.storeTime = time.Now(), time.UnixMilli(st.Mtime)
			s.mu.Unlock()
			switch {
			case !valueOK:
				value, valueErr = s.value(ctx, name)
				if valueErr != nil {
					return backends.Grant{}, valueErr
				}
			case errors.Is(valueErr, zk.ErrNoNode):
				value = nil
			case valueErr != nil:
				return backends.Grant{}, s.fail(ctx, op, name, valueErr)
			case value == nil:
				value = []byte{}
			}
			return backends.Grant{Token: tok, Value: value, Digest: s.digest(st, s.knownGroups(groupsRev))}, nil
		case errors.Is(err, zk.ErrNodeExists) && failed == 0:
			g, retry, err := s.taken(ctx, name)
			if !retry {
				return g, err
			}
		case errors.Is(err, zk.ErrNodeExists) && failed == 1:
			// A child of ours left from a term whose lease node someone
			// deleted: remove it and try again.
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(s.paths.owned(s.id, name), -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return backends.Grant{}, s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNodeExists) && holder != "" && failed == 2:
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(holder, -1) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return backends.Grant{}, s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNoNode) && holder != "" && failed == 2:
			withHolder = false // the group has no node: no members to show it to
		case errors.Is(err, zk.ErrNoNode) && failed == 0:
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return s.b.ensureLayout(c) }); err != nil {
				return backends.Grant{}, s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNoNode):
			return backends.Grant{}, s.lost(op, name)
		default:
			return backends.Grant{}, s.fail(ctx, op, name, err)
		}
	}
	return backends.Grant{}, s.b.unavailable(ctx, op, name, errors.New("the lease node kept changing; try again"))
}

// undo deletes what an acquisition within the amnesia guard created.
func (s *session) undo(ctx context.Context, name, holder string) {
	ops := []any{
		&zk.DeleteRequest{Path: s.paths.owned(s.id, name), Version: -1},
		&zk.DeleteRequest{Path: s.paths.lease(name), Version: -1},
	}
	if holder != "" {
		ops = append(ops, &zk.DeleteRequest{Path: holder, Version: -1})
	}
	_ = s.do(ctx, "acquire", name, func(c *zk.Conn) error { _, err := c.Multi(ops...); return err })
}

// reacquire answers an Acquire of a lease the session holds: the same
// token, with the value and the digest. ok is false if the lease turns out
// not to be the session's any more.
func (s *session) reacquire(ctx context.Context, name string, h heldLease) (backends.Grant, bool, error) {
	const op = "acquire"
	var (
		lease, own *zk.Stat
		data       []byte
		value      []byte
		hasValue   bool
	)
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		return parallel(
			func() error {
				var err error
				data, lease, err = c.Get(s.paths.lease(name))
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return err
			},
			func() error {
				var err error
				value, _, err = c.Get(s.paths.value(name))
				hasValue = err == nil
				if errors.Is(err, zk.ErrNoNode) {
					return nil
				}
				return err
			},
			func() error {
				var err error
				_, own, err = c.Exists(s.paths.session(s.id))
				return err
			})
	})
	if err != nil {
		return backends.Grant{}, false, s.fail(ctx, op, name, err)
	}
	if own == nil || own.Czxid == 0 {
		return backends.Grant{}, false, s.lost(op, name)
	}
	if sid, _ := parseLeaseData(data); lease == nil || sid != s.id || backends.Token(s.gen.base+lease.Czxid) != h.token {
		s.mu.Lock()
		delete(s.held, name)
		s.mu.Unlock()
		return backends.Grant{}, false, nil
	}
	if !hasValue {
		value = nil
	} else if value == nil {
		value = []byte{}
	}
	return backends.Grant{Token: h.token, Value: value, Digest: s.digest(own, s.knownGroups(0))}, true, nil
}

// taken answers an Acquire whose lease node exists: the session's own
// (an earlier acquisition whose reply was lost: adopt it), another
// session's (a *HeldError), or gone by now (retry).
func (s *session) taken(ctx context.Context, name string) (g backends.Grant, retry bool, err error) {
	const op = "acquire"
	var (
		data []byte
		st   *zk.Stat
	)
	err = s.do(ctx, op, name, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(s.paths.lease(name))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Grant{}, true, nil
	}
	if err != nil {
		return backends.Grant{}, false, s.fail(ctx, op, name, err)
	}
	sid, identity := parseLeaseData(data)
	tok := backends.Token(s.gen.base + st.Czxid)
	if sid != s.id {
		return backends.Grant{}, false, fmt.Errorf("%s: %w", opName(op, name), &backends.HeldError{
			Name: name, Holder: backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: tok}})
	}
	s.mu.Lock()
	s.held[name] = heldLease{token: tok}
	s.mu.Unlock()
	g, ok, err := s.reacquire(ctx, name, heldLease{token: tok})
	return g, !ok && err == nil, err
}

// value reads the value node of name: nil if none was ever stored.
func (s *session) value(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	err := s.do(ctx, "acquire", name, func(c *zk.Conn) error {
		var err error
		data, _, err = c.Get(s.paths.value(name))
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil
	case err != nil:
		return nil, s.fail(ctx, "acquire", name, err)
	case data == nil:
		return []byte{}, nil
	}
	return data, nil
}

// Release deletes the lease node, the session's child for it and any
// holder marker in one multi, if the session's own record says it holds
// name with token (B4; ZooKeeper's check compares data versions, not
// czxids): the multi then fails unless the session's child exists, so a
// lease lost meanwhile is not touched. Otherwise it reads the digest.
func (s *session) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	const op = "release"
	if err := args.Name(op, name); err != nil {
		return backends.Digest{}, err
	}
	s.mu.Lock()
	h, ok := s.held[name]
	s.mu.Unlock()
	if !ok || h.token != token {
		return s.readDigest(ctx, op, name)
	}
	ops := []any{
		&zk.DeleteRequest{Path: s.paths.owned(s.id, name), Version: -1},
		&zk.DeleteRequest{Path: s.paths.lease(name), Version: -1},
	}
	if h.holder != "" {
		ops = append(ops, &zk.DeleteRequest{Path: h.holder, Version: -1})
	}
	ops = append(ops, &zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
	var (
		st     *zk.Stat
		failed int
	)
	counted := s.watches.releasing(name)
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		res, err := c.Multi(ops...)
		failed, err = multiErr(res, err)
		if err == nil {
			st = res[len(res)-1].Stat
		}
		return err
	})
	if err != nil && counted {
		s.watches.released(name)
	}
	switch {
	case err == nil:
		groupsRev := int64(0)
		s.mu.Lock()
		delete(s.held, name)
		if h.holder != "" {
			group, _, _ := backends.SplitPartition(name)
			if _, ok := s.joined[group]; ok {
				groupsRev = st.Mzxid
			}
		}
		s.mu.Unlock()
		return s.digest(st, s.knownGroups(groupsRev)), nil
	case errors.Is(err, zk.ErrNoNode) && failed == 0:
		// The session no longer holds it.
		s.mu.Lock()
		delete(s.held, name)
		s.mu.Unlock()
		return s.readDigest(ctx, op, name)
	case errors.Is(err, zk.ErrNoNode) && failed > 0 && failed < len(ops)-1:
		// Our child exists but the lease node (or marker) is gone: someone
		// deleted it; drop our child.
		s.mu.Lock()
		delete(s.held, name)
		s.mu.Unlock()
		err := s.do(ctx, op, name, func(c *zk.Conn) error { return c.Delete(s.paths.owned(s.id, name), -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return backends.Digest{}, s.fail(ctx, op, name, err)
		}
		return s.readDigest(ctx, op, name)
	case errors.Is(err, zk.ErrNoNode):
		return backends.Digest{}, s.lost(op, name)
	}
	return backends.Digest{}, s.fail(ctx, op, name, err)
}

// readDigest reads the session node's Stat: the digest of a no-op.
func (s *session) readDigest(ctx context.Context, op, name string) (backends.Digest, error) {
	var st *zk.Stat
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		ok, stat, err := c.Exists(s.paths.session(s.id))
		if err == nil && !ok {
			return zk.ErrNoNode
		}
		st = stat
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Digest{}, s.lost(op, name)
	}
	if err != nil {
		return backends.Digest{}, s.fail(ctx, op, name, err)
	}
	return s.digest(st, s.knownGroups(0)), nil
}

// Holder reads the lease node: its data names the holder's session and
// identity, and its czxid gives the token. Remaining is 0: ZooKeeper does
// not tell how long another session has left.
func (s *session) Holder(ctx context.Context, name string) (backends.Holder, error) {
	const op = "holder"
	if err := args.Name(op, name); err != nil {
		return backends.Holder{}, err
	}
	var (
		data []byte
		st   *zk.Stat
	)
	err := s.do(ctx, op, name, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(s.paths.lease(name))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return backends.Holder{}, nil
	}
	if err != nil {
		return backends.Holder{}, s.fail(ctx, op, name, err)
	}
	sid, identity := parseLeaseData(data)
	return backends.Holder{Session: backends.SessionID(sid), Identity: identity, Token: backends.Token(s.gen.base + st.Czxid)}, nil
}

// PutValue writes the value node in a multi that first checks that the
// session's child for the lease exists, after the session's own record
// said it holds name with token (B4).
func (s *session) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	const op = "put value"
	if err := args.Value(op, name, value); err != nil {
		return err
	}
	s.mu.Lock()
	h, ok := s.held[name]
	s.mu.Unlock()
	if err := s.do(ctx, op, name, func(*zk.Conn) error { return nil }); err != nil {
		return err // expired, closed or an ended context come first
	}
	if !ok || h.token != token {
		return fmt.Errorf("%s with token %d: %w", opName(op, name), token, backends.ErrNotHolder)
	}
	data := append([]byte{}, value...)
	check := &zk.CheckVersionRequest{Path: s.paths.owned(s.id, name), Version: -1}
	for range 3 {
		var failed int
		err := s.do(ctx, op, name, func(c *zk.Conn) error {
			res, err := c.Multi(check, &zk.SetDataRequest{Path: s.paths.value(name), Data: data, Version: -1})
			failed, err = multiErr(res, err)
			if errors.Is(err, zk.ErrNoNode) && failed == 1 {
				res, err = c.Multi(check, &zk.CreateRequest{Path: s.paths.value(name), Data: data, Acl: s.b.acl, Flags: zk.FlagPersistent})
				failed, err = multiErr(res, err)
			}
			return err
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode) && failed == 0:
			s.mu.Lock()
			delete(s.held, name)
			s.mu.Unlock()
			return fmt.Errorf("%s with token %d: the session no longer holds it: %w", opName(op, name), token, backends.ErrNotHolder)
		case errors.Is(err, zk.ErrNoNode) && failed == 1:
			if err := s.do(ctx, op, name, func(c *zk.Conn) error { return s.b.ensureLayout(c) }); err != nil {
				return s.fail(ctx, op, name, err)
			}
		case errors.Is(err, zk.ErrNodeExists):
			// created meanwhile: write it
		default:
			return s.fail(ctx, op, name, err)
		}
	}
	return s.b.unavailable(ctx, op, name, errors.New("the value node kept changing; try again"))
}

// Join adds the session's member node to the group node, with a
// compare-and-swap on the group node's data version (which holds the
// partition count): the count is recorded by a join while the group has no
// members, and a join with another count while it has some is refused.
// Two round trips: the group node and its children, read together, then
// the multi.
func (s *session) Join(ctx context.Context, group string, partitions int) error {
	const op = "join"
	if err := args.Group(op, group, partitions); err != nil {
		return err
	}
	for range 8 {
		n, members, st, err := s.readGroup(ctx, op, group)
		if errors.Is(err, zk.ErrNoNode) {
			err = s.do(ctx, op, group, func(c *zk.Conn) error {
				_, err := c.Create(s.paths.group(group), nil, zk.FlagPersistent, s.b.acl)
				if errors.Is(err, zk.ErrNoNode) {
					if err = s.b.ensureLayout(c); err == nil {
						_, err = c.Create(s.paths.group(group), nil, zk.FlagPersistent, s.b.acl)
					}
				}
				if errors.Is(err, zk.ErrNodeExists) {
					return nil
				}
				return err
			})
			if err != nil {
				return s.fail(ctx, op, group, err)
			}
			continue
		}
		if err != nil {
			return err
		}
		if len(members) > 0 && n != partitions {
			return fmt.Errorf("%s with %d partitions, its members have %d: %w", opName(op, group), partitions, n, backends.ErrGroupMismatch)
		}
		if slices.Contains(members, s.id) {
			s.mu.Lock()
			s.joined[group] = partitions
			s.mu.Unlock()
			return nil
		}
		ops := []any{&zk.CheckVersionRequest{Path: s.paths.group(group), Version: st.Version}}
		if len(members) == 0 && n != partitions {
			ops = []any{&zk.SetDataRequest{Path: s.paths.group(group), Data: []byte(strconv.Itoa(partitions)), Version: st.Version}}
		}
		ops = append(ops, &zk.CreateRequest{Path: s.paths.member(group, s.id), Acl: s.b.acl, Flags: zk.FlagEphemeral})
		// Partitions of the group this session already holds get their
		// holder markers now.
		s.mu.Lock()
		var marked []string
		for name, h := range s.held {
			if g, i, ok := backends.SplitPartition(name); ok && g == group && i < partitions && h.holder == "" {
				ops = append(ops, &zk.CreateRequest{Path: s.paths.holder(group, i, s.id), Acl: s.b.acl, Flags: zk.FlagEphemeral})
				marked = append(marked, name)
			}
		}
		s.mu.Unlock()
		var failed int
		err = s.do(ctx, op, group, func(c *zk.Conn) error {
			res, err := c.Multi(ops...)
			failed, err = multiErr(res, err)
			return err
		})
		switch {
		case err == nil:
			s.mu.Lock()
			s.joined[group] = partitions
			for _, name := range marked {
				h := s.held[name]
				_, i, _ := backends.SplitPartition(name)
				h.holder = s.paths.holder(group, i, s.id)
				s.held[name] = h
			}
			s.mu.Unlock()
			return nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode) && failed == 0:
			continue // the count changed, or the node went: read again
		case errors.Is(err, zk.ErrNodeExists) && failed == 1:
			continue // joined meanwhile (an earlier join whose reply was lost)
		default:
			return s.fail(ctx, op, group, err)
		}
	}
	return s.b.unavailable(ctx, op, group, errors.New("the group node kept changing; try again"))
}

// readGroup reads a group node's partition count and its children, in one
// pipelined pair of reads that agree on the node's data version.
func (s *session) readGroup(ctx context.Context, op, group string) (n int, members []string, st *zk.Stat, err error) {
	var children []string
	var holders map[int]string
	for range 4 {
		var data []byte
		var dst *zk.Stat
		err = s.do(ctx, op, group, func(c *zk.Conn) error {
			return parallel(
				func() error { var err error; data, dst, err = c.Get(s.paths.group(group)); return err },
				func() error { var err error; children, st, err = c.Children(s.paths.group(group)); return err })
		})
		if errors.Is(err, zk.ErrNoNode) {
			return 0, nil, nil, err
		}
		if err != nil {
			return 0, nil, nil, s.fail(ctx, op, group, err)
		}
		if dst.Version != st.Version {
			continue // the count changed between the reads
		}
		n, _ = strconv.Atoi(string(data))
		members, holders = groupChildren(children)
		_ = holders
		slices.Sort(members)
		return n, members, st, nil
	}
	return 0, nil, nil, s.b.unavailable(ctx, op, group, errors.New("the group node kept changing; try again"))
}

// Leave deletes the session's member node, and writes the session node in
// the same multi: the write's zxid is the session's membership revision
// (Digest.Groups).
func (s *session) Leave(ctx context.Context, group string) error {
	const op = "leave"
	if err := args.Name(op, group); err != nil {
		return err
	}
	var (
		st     *zk.Stat
		failed int
	)
	err := s.do(ctx, op, group, func(c *zk.Conn) error {
		res, err := c.Multi(
			&zk.DeleteRequest{Path: s.paths.member(group, s.id), Version: -1},
			&zk.SetDataRequest{Path: s.paths.session(s.id), Data: s.identity, Version: -1})
		failed, err = multiErr(res, err)
		if err == nil {
			st = res[1].Stat
		}
		return err
	})
	switch {
	case err == nil:
		s.mu.Lock()
		delete(s.joined, group)
		s.leaveRev = max(s.leaveRev, st.Mzxid)
		s.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrNoNode) && failed == 0:
		s.mu.Lock()
		delete(s.joined, group) // not a member
		s.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return s.lost(op, group)
	}
	return s.fail(ctx, op, group, err)
}

// Members reads the group node's children (members and partition
// holders) with its partition count, in one pipelined pair of reads.
func (s *session) Members(ctx context.Context, group string) (backends.GroupView, error) {
	const op = "members"
	if err := args.Name(op, group); err != nil {
		return backends.GroupView{}, err
	}
	var (
		data     []byte
		children []string
		dst, cst *zk.Stat
	)
	for range 4 {
		err := s.do(ctx, op, group, func(c *zk.Conn) error {
			return parallel(
				func() error { var err error; data, dst, err = c.Get(s.paths.group(group)); return err },
				func() error { var err error; children, cst, err = c.Children(s.paths.group(group)); return err })
		})
		if errors.Is(err, zk.ErrNoNode) {
			return backends.GroupView{}, nil
		}
		if err != nil {
			return backends.GroupView{}, s.fail(ctx, op, group, err)
		}
		if dst.Version == cst.Version {
			break
		}
	}
	members, holders := groupChildren(children)
	if len(members) == 0 {
		return backends.GroupView{}, nil
	}
	n, _ := strconv.Atoi(string(data))
	v := backends.GroupView{Partitions: n, Holders: make([]backends.SessionID, n)}
	for _, m := range members {
		v.Members = append(v.Members, backends.SessionID(m))
	}
	slices.Sort(v.Members)
	for i, sid := range holders {
		if i < n {
			v.Holders[i] = backends.SessionID(sid)
		}
	}
	return v, nil
}

// Close closes the ZooKeeper session: ZooKeeper deletes its ephemeral
// nodes (leases, memberships, the marker) at once, waking watchers. It
// waits for the connection to end until ctx ends. Closing a session that
// has ended returns nil.
func (s *session) Close(ctx context.Context) error {
	if s.isDead() {
		return nil
	}
	s.end(fmt.Errorf("it was closed: %w", backends.ErrSessionExpired))
	select {
	case <-s.gone:
		return nil
	case <-ctx.Done():
		return s.b.unavailable(ctx, "close", "", errors.New("the connection did not close in time (it goes on closing)"))
	}
}
