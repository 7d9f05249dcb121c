package simbazk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Dialer dials one ZooKeeper server; it has go-zookeeper's dialer signature
// (zk.Dialer). See [WithDialer].
type Dialer func(network, address string, timeout time.Duration) (net.Conn, error)

// wire is the network side of one session: the dialer go-zookeeper uses for
// every connection of the session's *zk.Conn. It does four things the
// driver does not:
//
//   - it caps the dial timeout and the deadlines of the connect handshake
//     to a quarter of the session timeout (go-zookeeper waits up to 10 × ⅔
//     of it for a connect reply, which loses the session on a frozen
//     server);
//   - it reads the negotiated session timeout from the connect reply (the
//     driver keeps it private), for B1;
//   - it refuses to open a second ZooKeeper session: once the session
//     existed, a connect request for any other session id (go-zookeeper
//     asks for a new session after the old one expired) fails before it is
//     sent, so that no call of the old session can run in a new one (S3);
//   - it records when each request or ping was written on the current
//     connection, so that a keep-alive can tell which earlier touch of the
//     session the ensemble's leader has surely seen (B1);
//   - it pings only a connection that is idle (see idlePing), as
//     ZooKeeper's Java client does, and drops go-zookeeper's pings, which
//     go every third of the timeout whatever else was written: a session
//     renewed more often than half its timeout sends one request per
//     renewal and nothing else;
//   - it keeps, per connection, what the session learnt of the server at
//     its other end: whether it is a standalone server (see serverKind).
type wire struct {
	dial    Dialer
	servers []string
	cap     time.Duration // dial and handshake bound
	single  bool          // refuse a second session (S3); false for the backend's own reads

	mu        sync.Mutex
	sid       int64         // the session's id, once established; 0 before
	refused   bool          // a connect request for another session was refused
	timeout   time.Duration // negotiated, from the last connect reply
	passwd    []byte        // the session's password, from the connect reply (tests expire sessions with it)
	cur       *wireConn     // the connection that completed the last handshake
	dialErrs  map[string]error
	onRefused func() // called (once) when the wire refuses a new session

	awaits map[*await]struct{} // see await

	// The host provider's state (see Next).
	hosts    []string
	next     int
	attempts int  // dials since the last handshake that made a session
	ended    bool // the session ended: go-zookeeper's loop is to stop
}

// wireErrNewSession is the error of a connect request for a session other
// than the one this wire belongs to.
var wireErrNewSession = errors.New("simbazk: refusing to open a new ZooKeeper session on the connection of an expired one")

func newWire(dial Dialer, servers []string, capTo time.Duration, single bool) *wire {
	return &wire{dial: dial, servers: servers, cap: capTo, single: single, dialErrs: make(map[string]error)}
}

// The wire is also go-zookeeper's host provider (zk.HostProvider), so that
// reconnecting does not wait a second after each round of the servers, as
// go-zookeeper's own provider makes it: Dial backs off instead, from 25 ms
// up to 250 ms between rounds, and the backend's sessions reconnect as soon
// as a server is back. go-zookeeper checks whether it was closed only at the
// start of a round, so Next starts one once the session has ended.

// Init implements zk.HostProvider.
func (w *wire) Init(servers []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hosts = append([]string(nil), servers...)
	return nil
}

// Len implements zk.HostProvider.
func (w *wire) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.hosts)
}

// Next implements zk.HostProvider.
func (w *wire) Next() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hosts[w.next%len(w.hosts)]
	w.next++
	return h, w.ended || w.refused
}

// Connected implements zk.HostProvider.
func (w *wire) Connected() {}

// end tells go-zookeeper's loop, through Next, to stop reconnecting.
func (w *wire) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
}

// Dial is the zk.Dialer of the session.
func (w *wire) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	w.mu.Lock()
	refused, ended := w.refused, w.ended
	rounds := 0
	if len(w.hosts) > 0 {
		rounds = w.attempts / len(w.hosts)
	}
	w.attempts++
	w.mu.Unlock()
	if refused {
		return nil, wireErrNewSession
	}
	if ended {
		return nil, errors.New("simbazk: the session ended")
	}
	if rounds > 0 {
		time.Sleep(min(25*time.Millisecond<<min(rounds-1, 4), 250*time.Millisecond))
	}
	timeout = min(timeout, w.cap)
	c, err := w.dial(network, addr, timeout)
	w.mu.Lock()
	if err != nil {
		w.dialErrs[addr] = err
	} else {
		delete(w.dialErrs, addr)
	}
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c, w: w, start: time.Now()}, nil
}

// await is a wait for a request holding pattern to be written.
type await struct {
	pattern []byte
	sent    chan struct{}
	once    sync.Once
}

// awaitWrite returns a wait that ends (its sent channel closes) when a
// request whose bytes hold ZooKeeper's encoding of path (a length, then the
// bytes) has been written to the server. Stop it with stopAwait.
func (w *wire) awaitWrite(path string) *await {
	a := &await{pattern: append(binary.BigEndian.AppendUint32(nil, uint32(len(path))), path...), sent: make(chan struct{})}
	w.mu.Lock()
	if w.awaits == nil {
		w.awaits = make(map[*await]struct{})
	}
	w.awaits[a] = struct{}{}
	w.mu.Unlock()
	return a
}

func (w *wire) stopAwait(a *await) {
	w.mu.Lock()
	delete(w.awaits, a)
	w.mu.Unlock()
}

// written ends the waits whose pattern p holds.
func (w *wire) written(p []byte) {
	w.mu.Lock()
	if len(w.awaits) == 0 {
		w.mu.Unlock()
		return
	}
	var done []*await
	for a := range w.awaits {
		if bytes.Contains(p, a.pattern) {
			done = append(done, a)
			delete(w.awaits, a)
		}
	}
	w.mu.Unlock()
	for _, a := range done {
		a.once.Do(func() { close(a.sent) })
	}
}

// dialErrors describes the last dial error of each server that failed.
func (w *wire) dialErrors() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := ""
	for _, addr := range w.servers {
		if err, ok := w.dialErrs[addr]; ok {
			if s != "" {
				s += "; "
			}
			s += fmt.Sprintf("%s: %v", addr, err)
		}
	}
	return s
}

// negotiated returns the session timeout of the last connect reply.
func (w *wire) negotiated() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timeout
}

// touchedBefore returns the latest time, no later than cutoff, at which the
// current connection wrote to the server, or its handshake time if that is
// later (a handshake touches the session at the leader itself): the latest
// touch of the session that the leader has surely seen by the time a
// request written after cutoff + one tick succeeded. ok is false if no
// connection has completed a handshake.
func (w *wire) touchedBefore(cutoff time.Time) (at time.Time, ok bool) {
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if c == nil {
		return time.Time{}, false
	}
	return c.touchedBefore(cutoff), true
}

// current returns the connection that completed the last handshake, or nil.
func (w *wire) current() *wireConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// serverKind is what a session learnt of the server at the other end of one
// connection, from the server's configuration node (configPath) read on
// that connection.
type serverKind int32

const (
	kindUnknown    serverKind = iota // not read yet, or the read failed
	kindStandalone                   // a standalone server: it is the leader of its own sessions
	kindEnsemble                     // a member of an ensemble, or a server too old to say
)

// wireConn is one connection of a session.
type wireConn struct {
	net.Conn
	w     *wire
	start time.Time
	kind  atomic.Int32 // a serverKind

	mu        sync.Mutex
	handshake bool   // the connect reply has been read
	sentReq   bool   // the connect request has been written
	reply     []byte // the connect reply so far
	writes    []time.Time
	pruned    time.Time   // the latest write dropped from writes
	idle      *time.Timer // pings the server once the connection is idle; nil until armed
	idleAfter time.Duration
	closed    bool

	wmu sync.Mutex // held while a packet is written, so the wire's pings go between packets
}

// A ping packet: length 8, xid -2, opcode 11. Its reply (xid -2) feeds
// go-zookeeper's read deadline and is otherwise ignored by it.
var pingPacket = []byte{0, 0, 0, 8, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 0, 11}

// idlePing returns after how long without a write the wire pings the server
// of a session whose negotiated timeout is timeout: half the timeout.
// go-zookeeper's read deadline is two thirds of the timeout after the last
// packet read, and the reply to the last write came after the write, so a
// ping's reply comes in time while a round trip takes less than a sixth of
// the timeout; the server, which expires the session a timeout after the
// last packet it read, is touched at least every half timeout.
func idlePing(timeout time.Duration) time.Duration { return timeout / 2 }

// keepWrites bounds how far back the write times go: keep-alives ask about
// a tick before they were sent, and ticks are at most a few seconds.
const keepWrites = 30 * time.Second

func (c *wireConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	first := !c.sentReq
	c.sentReq = true
	c.mu.Unlock()
	if first {
		if err := c.connectRequest(p); err != nil {
			c.Conn.Close()
			return 0, err
		}
	}
	if !first && bytes.Equal(p, pingPacket) && c.pingsItself() {
		return len(p), nil // go-zookeeper's ping: the wire pings when idle instead
	}
	c.wmu.Lock()
	now := time.Now()
	n, err := c.Conn.Write(p)
	c.wmu.Unlock()
	if !first && n == len(p) {
		c.w.written(p)
	}
	if !first && n > 0 {
		c.wrote(now)
	}
	return n, err
}

// pingsItself reports whether the wire pings this connection itself, arming
// its idle timer once the handshake has told the session timeout.
func (c *wireConn) pingsItself() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil {
		return true
	}
	if !c.handshake || c.closed {
		return false
	}
	timeout := c.w.negotiated()
	if timeout <= 0 {
		return false
	}
	c.idleAfter = idlePing(timeout)
	c.idle = time.AfterFunc(c.idleAfter, c.ping)
	return true
}

// ping writes a ping if nothing was written for idleAfter, and arms the
// timer again for the next idle span.
func (c *wireConn) ping() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	last := c.pruned
	if len(c.writes) > 0 {
		last = c.writes[len(c.writes)-1]
	}
	wait := time.Until(last.Add(c.idleAfter))
	c.mu.Unlock()
	if wait <= 0 {
		c.wmu.Lock()
		now := time.Now()
		_, err := c.Conn.Write(pingPacket)
		c.wmu.Unlock()
		if err != nil {
			return // go-zookeeper finds the broken connection by itself
		}
		c.wrote(now)
		wait = c.idleAfter
	}
	c.mu.Lock()
	if !c.closed {
		c.idle.Reset(wait)
	}
	c.mu.Unlock()
}

// wrote records a write at now.
func (c *wireConn) wrote(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, now)
	if old := now.Add(-keepWrites); c.writes[0].Before(old) {
		i := 0
		for i < len(c.writes)-1 && c.writes[i].Before(old) {
			i++
		}
		if i > 0 {
			c.pruned = c.writes[i-1]
			c.writes = append(c.writes[:0], c.writes[i:]...)
		}
	}
}

// Close stops the wire's pings, then closes the connection.
func (c *wireConn) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// connectRequest checks the connect request p, the first write of a
// connection: length, protocol version (4 bytes), last zxid seen (8),
// timeout (4), session id (8), password.
func (c *wireConn) connectRequest(p []byte) error {
	if len(p) < 28 {
		return nil
	}
	sid := int64(binary.BigEndian.Uint64(p[20:28]))
	w := c.w
	w.mu.Lock()
	if w.single && w.sid != 0 && sid != w.sid {
		first := !w.refused
		w.refused = true
		cb := w.onRefused
		w.mu.Unlock()
		if first && cb != nil {
			cb()
		}
		return wireErrNewSession
	}
	w.mu.Unlock()
	return nil
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if !c.handshake && n > 0 {
		c.reply = append(c.reply, p[:n]...)
		c.parseReply()
	}
	c.mu.Unlock()
	return n, err
}

// parseReply decodes the connect reply once it is whole: length, protocol
// version (4), timeout (4), session id (8), password. Called with c.mu held.
func (c *wireConn) parseReply() {
	if len(c.reply) < 4 {
		return
	}
	size := int(binary.BigEndian.Uint32(c.reply[:4]))
	if size > 1024 || size < 16 {
		c.handshake, c.reply = true, nil // not a connect reply we know
		return
	}
	if len(c.reply) < 4+size {
		return
	}
	c.handshake = true
	timeout := time.Duration(int32(binary.BigEndian.Uint32(c.reply[8:12]))) * time.Millisecond
	sid := int64(binary.BigEndian.Uint64(c.reply[12:20]))
	defer func() { c.reply = nil }()
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if sid == 0 {
		return // the session expired: go-zookeeper reports it
	}
	if w.sid == 0 || !w.single {
		w.sid = sid
	}
	if sid == w.sid {
		w.timeout = timeout
		w.cur = c
		w.attempts = 0
		if len(c.reply) >= 24 {
			if n := int(binary.BigEndian.Uint32(c.reply[20:24])); n >= 0 && len(c.reply) >= 24+n {
				w.passwd = append([]byte(nil), c.reply[24:24+n]...)
			}
		}
	}
}

// touchedBefore: see wire.touchedBefore.
func (c *wireConn) touchedBefore(cutoff time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.pruned
	for _, t := range c.writes {
		if t.After(cutoff) {
			break
		}
		at = t
	}
	if c.start.After(at) {
		at = c.start
	}
	return at
}

// capped returns t, or now + cap if t is later or zero, during the
// handshake; after it, t unchanged.
func (c *wireConn) capped(t time.Time) time.Time {
	c.mu.Lock()
	hs := c.handshake
	c.mu.Unlock()
	if hs {
		return t
	}
	limit := time.Now().Add(c.w.cap)
	if t.IsZero() || t.After(limit) {
		return limit
	}
	return t
}

func (c *wireConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.capped(t)) }
func (c *wireConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.capped(t))
}
func (c *wireConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t))
}
