// Package faultnet puts network faults between a test's client and a real
// server: it is a dialer (go-redis's Options.Dialer, pgx's
// ConnConfig.DialFunc, go-zookeeper's zk.WithDialer) whose connections a test
// can cut, blackhole or slow down. The server is real and so are the
// connections — a cut closes them (the server sees the client go) and
// refuses new ones; a blackhole leaves them open but silent, as a dropped
// route does — only the client's side is steered, so the shared server is
// never touched.
//
// A store without a network, the in-process memory store, is reached through
// [Link.Backend] instead: the same faults, on one node's calls.
//
// For faults between processes (a node process and its server, the servers
// of a ZooKeeper ensemble), tests use a TCP proxy instead, in the nested
// tests module.
package faultnet

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Link is a client's network path to its servers. The zero Link is not
// usable; make one with [New]. It is safe for concurrent use.
type Link struct {
	mu    sync.Mutex
	state state
	heal  chan struct{} // closed when the current cut or blackhole ends
	delay time.Duration // replies
	hold  time.Duration // requests
	conns map[*conn]struct{}
}

type state int

const (
	up state = iota
	cut
	blackhole
)

// New returns a Link that is up.
func New() *Link {
	return &Link{heal: make(chan struct{}), conns: make(map[*conn]struct{})}
}

// ErrCut is the error of a dial or an I/O call through a Link that is cut. It
// wraps syscall.ECONNREFUSED, as a refused connection would.
var ErrCut = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// Dial dials addr unless the link is cut (it fails at once) or blackholed
// (it waits until the link heals or ctx ends). Its signature is go-redis's
// and pgx's dialer.
func (l *Link) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := l.wait(ctx.Done(), nil, nil); err != nil {
		if ctx.Err() != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
		}
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

// DialTimeout is Dial bounded by timeout. Its signature is go-zookeeper's
// dialer.
func (l *Link) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.Dial(ctx, network, addr)
}

// Cut closes every connection made through the link and makes new dials
// fail with [ErrCut], until [Link.Heal]. Dials, reads and writes waiting in
// a blackhole fail at once, as on a cut link.
func (l *Link) Cut() {
	l.mu.Lock()
	l.state = cut
	conns := l.conns
	l.conns = make(map[*conn]struct{})
	close(l.heal) // wakes the waiters of a blackhole: they find the cut
	l.heal = make(chan struct{})
	l.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// Blackhole makes the link silent until [Link.Heal]: connections stay open,
// but reads and writes wait (until their deadline, or the heal), and new
// dials wait too — as when packets are dropped.
func (l *Link) Blackhole() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = blackhole
}

// Heal ends a cut or a blackhole: dials succeed again, and the reads and
// writes that waited in a blackhole go on.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != up {
		l.state = up
		close(l.heal)
		l.heal = make(chan struct{})
	}
}

// DelayReplies holds every reply for d before the client sees it, from
// now on; 0 ends the delay. The server handled the request on time; only
// the client learns late. The delay is a latency, not a narrower pipe: a
// read takes whatever has arrived (a reply's header and body, several
// replies), holds it once, and later reads return the rest at once, so a
// reply read in pieces is not delayed once per piece.
func (l *Link) DelayReplies(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
}

// DelayRequests holds every request (every write) for d before it goes to
// the server, from now on; 0 ends the delay. The server handles the request
// late, as after a retry or a long queue.
func (l *Link) DelayRequests(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold = d
}

func (l *Link) wrap(c net.Conn) net.Conn {
	w := &conn{Conn: c, l: l, closed: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == cut {
		c.Close()
	} else {
		l.conns[w] = struct{}{}
	}
	return w
}

// wait returns nil while the link is up; an error at once while it is cut;
// and while it is blackholed, waits until it heals (nil), or done, closed or
// deadline fires (an error).
func (l *Link) wait(done, closed <-chan struct{}, deadline <-chan time.Time) error {
	for {
		l.mu.Lock()
		st, heal := l.state, l.heal
		l.mu.Unlock()
		switch st {
		case up:
			return nil
		case cut:
			return ErrCut
		}
		select {
		case <-heal:
		case <-done:
			return context.DeadlineExceeded
		case <-closed:
			return net.ErrClosed
		case <-deadline:
			return os.ErrDeadlineExceeded
		}
	}
}

// conn is a connection made through a Link.
type conn struct {
	net.Conn
	l *Link

	closed    chan struct{} // closed by Close: a held read or write returns then, as on a socket
	closeOnce sync.Once

	readMu  sync.Mutex
	pending []byte // data read from the server and held, not yet returned

	mu            sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time
	moved         chan struct{} // closed and replaced when a deadline is set
}

// deadline returns the read or write deadline as a channel that fires when
// it passes (nil if there is none), and a channel closed when a deadline is
// set again. Clients such as pgx set a deadline while a call waits, to end
// it when its context ends: waits select on both and look again when one
// moved, as a socket's blocked read would.
func (c *conn) deadline(read bool) (fire <-chan time.Time, moved <-chan struct{}, stop func()) {
	c.mu.Lock()
	dl := c.writeDeadline
	if read {
		dl = c.readDeadline
	}
	if c.moved == nil {
		c.moved = make(chan struct{})
	}
	moved = c.moved
	c.mu.Unlock()
	if dl.IsZero() {
		return nil, moved, func() {}
	}
	t := time.NewTimer(time.Until(dl))
	return t.C, moved, func() { t.Stop() }
}

// waitLink waits while the link is blackholed, until it heals (nil), the
// deadline passes or the connection is closed (an error); it fails at once
// while the link is cut. Clients such as go-sql-driver end a call whose
// context ended by closing its connection: as on a socket, the close ends
// the wait.
func (c *conn) waitLink(read bool) error {
	for {
		fire, moved, stop := c.deadline(read)
		err := c.l.wait(moved, c.closed, fire)
		stop()
		select {
		case <-moved:
			if err != nil && !errors.Is(err, ErrCut) {
				continue // a new deadline: wait again, until it
			}
		default:
		}
		return err
	}
}

// hold waits for d, or until the deadline passes or the connection is
// closed (false).
func (c *conn) hold(read bool, d time.Duration) bool {
	end := time.NewTimer(d)
	defer end.Stop()
	for {
		fire, moved, stop := c.deadline(read)
		select {
		case <-end.C:
			stop()
			return true
		case <-fire:
			stop()
			return false
		case <-c.closed:
			stop()
			return false
		case <-moved:
			stop()
		}
	}
}

func (c *conn) Read(p []byte) (int, error) {
	if err := c.waitLink(true); err != nil {
		return 0, c.opError("read", err)
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	c.l.mu.Lock()
	d := c.l.delay
	c.l.mu.Unlock()
	if d <= 0 {
		n, err := c.Conn.Read(p)
		if err2 := c.waitLink(true); err2 != nil && err == nil {
			return 0, c.opError("read", err2)
		}
		return n, err
	}
	buf := make([]byte, max(len(p), 64<<10))
	n, err := c.Conn.Read(buf)
	if n > 0 && !c.hold(true, d) {
		if c.isClosed() {
			return 0, c.opError("read", net.ErrClosed)
		}
		// The data arrived, but after the deadline: the client sees a
		// timeout, and the bytes are lost with the connection.
		c.Conn.Close()
		return 0, c.opError("read", os.ErrDeadlineExceeded)
	}
	if err2 := c.waitLink(true); err2 != nil && err == nil {
		return 0, c.opError("read", err2)
	}
	m := copy(p, buf[:n])
	c.pending = buf[m:n]
	if m < n {
		err = nil // the rest comes first; the error, if any, again after it
	}
	return m, err
}

func (c *conn) Write(p []byte) (int, error) {
	if err := c.waitLink(false); err != nil {
		return 0, c.opError("write", err)
	}
	c.l.mu.Lock()
	hold := c.l.hold
	c.l.mu.Unlock()
	if hold > 0 && !c.hold(false, hold) {
		if c.isClosed() {
			return 0, c.opError("write", net.ErrClosed)
		}
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	}
	return c.Conn.Write(p)
}

func (c *conn) opError(op string, err error) error {
	if errors.Is(err, ErrCut) {
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Addr: c.RemoteAddr(), Err: err}
}

func (c *conn) SetDeadline(t time.Time) error {
	c.setDeadline(func() { c.readDeadline, c.writeDeadline = t, t })
	return c.Conn.SetDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.setDeadline(func() { c.readDeadline = t })
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(func() { c.writeDeadline = t })
	return c.Conn.SetWriteDeadline(t)
}

// setDeadline sets a deadline and wakes the waits, which look again.
func (c *conn) setDeadline(set func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	set()
	if c.moved != nil {
		close(c.moved)
	}
	c.moved = make(chan struct{})
}

// isClosed reports whether Close was called.
func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
