package simbazk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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

	mu          sync.Mutex
	held        map[string]heldLease
	joined      map[string]int          // group → partitions
	leaveRev    int64                   // zxid of the session's last leave
	groupsRev   int64                   // Digest.Groups as last reported
	b2          *time.Timer             // B2: closes the session when renewals stop
	b2At        time.Time               // B2: when it closes, unless a renewal moves it
	b2Lapsed    bool                    // B2: the session is closing; no renewal counts
	storeAt     time.Time               // local time when storeTime was read (sent)
	storeTime   time.Time               // the store's clock at the last renewal
	releasing   map[string]int          // own deletes of lease nodes not yet seen as events
	resv        map[string]*reservation // this session's reservations (queue.go)
	refusedLast map[string]bool         // names whose last call was a refused Acquire, for the Watch that follows
	qLeases     int                     // leases held through a reservation: no child of the session node
	qVersion    uint64                  // acquisitions and releases of those (the digest's share)
	lastStat    zk.Stat                 // the session node's latest Stat a reply carried (lastDigest)

	watches watcher
}

// heldLease is a lease the session holds, as the session recorded it (B4).
type heldLease struct {
	token  backends.Token
	holder string // the group holder marker created with it, or ""
	queue  string // the reservation node it is held through (queue.go), or ""
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
	if b.readOnly {
		return nil, backends.Renewal{}, fmt.Errorf("simbazk: open session: %w", ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return nil, backends.Renewal{}, fmt.Errorf("simbazk: open session: %w", err)
	}
	start := time.Now()
	ttl := min(opts.TTL, b.maxLease)
	s := &session{
		b:           b,
		identity:    []byte(opts.Identity),
		paths:       b.paths,
		ready:       make(chan struct{}),
		up:          make(chan struct{}),
		dead:        make(chan struct{}),
		gone:        make(chan struct{}),
		held:        make(map[string]heldLease),
		joined:      make(map[string]int),
		releasing:   make(map[string]int),
		resv:        make(map[string]*reservation),
		refusedLast: make(map[string]bool),
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
		// Before any other request (see authenticate).
		if err := s.do(ctx, "open session", "", func(c *zk.Conn) error { return b.authenticate(c, s.w) }); err != nil {
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
		s.valueEvent("") // replayed events need not come in order (queue.go)
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
		if conn == nil {
			s.w.end()
			return
		}
		go s.closeConn(conn, err)
	})
}

// closeConn closes the connection of a session that ended for err.
// go-zookeeper's Conn.Close sends the closeSession request only while it
// is connected (v1.0.4): during a reconnection it ends its loop at once,
// and the server keeps the session, and its leases, until it expires them.
// So a session closed (by Close, or by B2) while its connection is down
// lets go-zookeeper reconnect, and closes once it has — at most the
// session's timeout later, by when the server has expired it anyway, and
// not once the backend is closed. No call runs meanwhile: the session has
// ended. A session that ZooKeeper expired has nothing to close on the
// server, and a closed backend does not wait.
func (s *session) closeConn(conn *zk.Conn, err error) {
	defer conn.Close()
	defer s.w.end()
	if errors.Is(err, errExpired) || !errors.Is(err, backends.ErrSessionExpired) || errors.Is(err, backends.ErrClosed) {
		return
	}
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	select {
	case <-up:
		return
	default:
	}
	timeout := s.w.negotiated()
	if timeout <= 0 {
		timeout = s.b.maxLease
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-s.b.closing:
	}
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

// digest reads the session node's Stat: its children are the marker and
// the leases held, and its cversion rises by one per child created or
// deleted, that is, per lease acquired or released. Leases held through a
// reservation (queue.go) have no child there: the session counts them,
// and their acquisitions and releases, itself.
func (s *session) digest(st *zk.Stat, groups int64) backends.Digest {
	s.mu.Lock()
	if st.Mzxid >= s.lastStat.Mzxid {
		s.lastStat = *st
	}
	n, v := s.qLeases, s.qVersion
	s.mu.Unlock()
	return backends.Digest{Leases: int(st.NumChildren) - 1 + n, Version: uint64(st.Cversion) + v, Groups: uint64(groups)}
}

// lastDigest is the digest from the latest Stat of the session node a
// reply carried: every change of the node by the session writes it, so
// the one with the highest mzxid is the latest. A lease held through a
// reservation is taken and released without changing the node, so this is
// their digest right after the change — unless a call of the session that
// changes the node is in flight, whose reply then carries the newer one.
func (s *session) lastDigest(groups int64) backends.Digest {
	s.mu.Lock()
	st := s.lastStat
	s.mu.Unlock()
	return s.digest(&st, groups)
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
	// Leases held through reservations (queue.go) have no child here:
	// each is checked by a read of its node, pipelined.
	queued := s.queuedLeases()
	gone := make([]bool, len(queued))
	err := s.do(ctx, "owned", "", func(c *zk.Conn) error {
		fns := []func() error{func() error {
			var err error
			children, st, err = c.Children(s.paths.session(s.id))
			return err
		}}
		for i, q := range queued {
			fns = append(fns, func() error {
				ok, _, err := c.Exists(q.path)
				gone[i] = err == nil && !ok
				return err
			})
		}
		return parallel(append(fns, s.groupReads(c, groups, pz)...)...)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, backends.Digest{}, s.lost("owned", "")
	}
	if err != nil {
		return nil, backends.Digest{}, s.fail(ctx, "owned", "", err)
	}
	held := make([]backends.Held, 0, len(children)+len(queued))
	var unknown []string
	s.mu.Lock()
	for i, q := range queued {
		if h, ok := s.held[q.name]; ok && h.queue == q.path {
			if gone[i] {
				s.forgetLocked(q.name)
			} else {
				held = append(held, backends.Held{Name: q.name, Token: h.token})
			}
		}
	}
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
	for name, h := range s.held {
		if h.queue == "" && !slices.Contains(children, name) {
			delete(s.held, name)
		}
	}
	g := s.groupsDigest(pz)
	s.mu.Unlock()
	slices.SortFunc(held, func(a, b backends.Held) int { return cmp.Compare(a.Name, b.Name) })
	return held, s.digest(st, g), nil
}

// Close closes the ZooKeeper session: ZooKeeper deletes its ephemeral
// nodes (leases, memberships, the marker) at once, waking watchers. It
// waits for the connection to end until ctx ends; while go-zookeeper
// reconnects, the connection is closed once it has reconnected (closeConn).
// Closing a session that has ended returns nil.
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
