package faultnet

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echo starts a line echo server on loopback.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("wrong echo " + line)
	}
	return err
}

// dialEcho dials a new echo server, at addr, through a new link.
func dialEcho(t *testing.T) (l *Link, c net.Conn, addr string) {
	t.Helper()
	addr, l = echo(t), New()
	c, err := l.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return l, c, addr
}

func TestCutAndHeal(t *testing.T) {
	l, c, addr := dialEcho(t)
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("round trip while up: %v", err)
	}
	l.Cut()
	if err := roundTrip(c, time.Second); err == nil {
		t.Error("round trip on a cut connection succeeded")
	}
	if _, err := l.Dial(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial while cut = %v; want connection refused", err)
	}
	l.Heal()
	c2, err := l.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial after heal: %v", err)
	}
	defer c2.Close()
	if err := roundTrip(c2, time.Second); err != nil {
		t.Errorf("round trip after heal: %v", err)
	}
}

func TestBlackhole(t *testing.T) {
	addr := echo(t)
	l := New()
	c, err := l.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l.Blackhole()
	start := time.Now()
	err = roundTrip(c, 100*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("round trip in a blackhole = %v; want a timeout", err)
	}
	if took := time.Since(start); took < 90*time.Millisecond || took > time.Second {
		t.Errorf("round trip in a blackhole returned after %v; want at its 100ms deadline", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Dial(ctx, "tcp", addr); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial in a blackhole = %v; want its context's deadline", err)
	}
	// A call waiting in the blackhole goes on when it heals.
	done := make(chan error, 1)
	c3, err := net.Dial("tcp", addr) // not through the link
	if err != nil {
		t.Fatal(err)
	}
	c3.Close()
	go func() { done <- roundTrip(c, 5*time.Second) }()
	time.Sleep(50 * time.Millisecond)
	l.Heal()
	if err := <-done; err != nil {
		t.Errorf("round trip across the heal: %v", err)
	}
}

// A cut ends what waits in a blackhole, as it ends everything else: a
// crashed node's reads without a deadline must not wait for a heal that never
// comes.
func TestCutEndsBlackhole(t *testing.T) {
	addr := echo(t)
	l := New()
	c, err := l.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l.Blackhole()
	done := make(chan error, 1)
	go func() { done <- roundTrip(c, time.Hour) }() // as good as none
	dialed := make(chan error, 1)
	go func() {
		_, err := l.Dial(context.Background(), "tcp", addr)
		dialed <- err
	}()
	time.Sleep(50 * time.Millisecond)
	l.Cut()
	select {
	case err := <-done:
		if err == nil {
			t.Error("round trip waiting in a blackhole succeeded after the cut")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("round trip waiting in a blackhole still waits 5s after the cut")
	}
	select {
	case err := <-dialed:
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial waiting in a blackhole, then cut = %v; want connection refused", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("dial waiting in a blackhole still waits 5s after the cut")
	}
}

func TestDelay(t *testing.T) {
	addr := echo(t)
	l := New()
	c, err := l.Dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, delay := range []func(time.Duration){l.DelayReplies, l.DelayRequests} {
		delay(80 * time.Millisecond)
		start := time.Now()
		if err := roundTrip(c, time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 80*time.Millisecond {
			t.Errorf("delayed round trip took %v; want at least 80ms", took)
		}
		if err := roundTrip(c, 40*time.Millisecond); err == nil {
			t.Error("a round trip whose deadline is shorter than the delay succeeded")
		}
		delay(0)
		c.Close()
		if c, err = l.Dial(context.Background(), "tcp", addr); err != nil {
			t.Fatal(err)
		}
	}
}

// A deadline set while a call waits ends the wait, as it would a blocked
// socket read: pgx sets one when a call's context ends.
func TestDeadlineMovedDuringWait(t *testing.T) {
	addr := echo(t)
	for _, fault := range []struct {
		name      string
		on, off   func(l *Link)
		blockRead bool
	}{
		{"blackhole", func(l *Link) { l.Blackhole() }, func(l *Link) { l.Heal() }, false},
		{"delayed replies", func(l *Link) { l.DelayReplies(time.Hour) }, func(l *Link) { l.DelayReplies(0) }, true},
		{"delayed requests", func(l *Link) { l.DelayRequests(time.Hour) }, func(l *Link) { l.DelayRequests(0) }, false},
	} {
		t.Run(fault.name, func(t *testing.T) {
			l := New()
			c, err := l.Dial(context.Background(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fault.on(l)
			defer fault.off(l)
			done := make(chan error, 1)
			go func() {
				if _, err := c.Write([]byte("ping\n")); err != nil {
					done <- err
					return
				}
				_, err := c.Read(make([]byte, 16))
				done <- err
			}()
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			if fault.blockRead {
				c.SetReadDeadline(time.Now()) // the write went through
			} else {
				c.SetDeadline(time.Now()) // as pgx does
			}
			select {
			case err := <-done:
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Errorf("the waiting call = %v; want a timeout", err)
				}
				if took := time.Since(start); took > 100*time.Millisecond {
					t.Errorf("the call returned %v after its deadline was set", took)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the waiting call did not return after its deadline was set")
			}
		})
	}
}

// A delayed reply read in pieces (a header, then its body, as ZooKeeper's
// and Redis's clients read) is held once, not once per piece; and replies
// that arrive while one is held are not queued a delay each behind it.
func TestDelayRepliesIsALatency(t *testing.T) {
	l, c, _ := dialEcho(t)
	const d = 100 * time.Millisecond
	l.DelayReplies(d)
	const replies = 5
	for range replies {
		if _, err := c.Write([]byte("pingpong\n")); err != nil {
			t.Fatal(err)
		}
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	for range replies {
		piece := make([]byte, 4) // the first piece, then the rest
		if _, err := io.ReadFull(c, piece); err != nil {
			t.Fatal(err)
		}
		rest := make([]byte, 5)
		if _, err := io.ReadFull(c, rest); err != nil {
			t.Fatal(err)
		}
		if got := string(piece) + string(rest); got != "pingpong\n" {
			t.Fatalf("read %q; want %q", got, "pingpong\n")
		}
	}
	took := time.Since(start)
	if took < d {
		t.Errorf("%d delayed replies read in %v; want at least the delay %v", replies, took, d)
	}
	if took >= replies*d {
		t.Errorf("%d delayed replies read in %v; want less than %v: the delay is a latency, not one per read", replies, took, replies*d)
	}
}

// A write held by DelayRequests returns as soon as the connection is
// closed, with net.ErrClosed, as a blocked write on a socket does: a
// client's goroutine blocked in it does not outlive the client's Close.
func TestCloseEndsHeldWrite(t *testing.T) {
	l, c, _ := dialEcho(t)
	l.DelayRequests(time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("ping\n"))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // the write is held
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("held write after Close = %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a held write still waits 5s after Close")
	}
}

// A read or write waiting in a blackhole returns as soon as its connection
// is closed, with net.ErrClosed, as a blocked call on a socket does:
// go-sql-driver ends a call whose context ended by closing its connection,
// and a wait that ignored the close held the call until the link healed.
func TestCloseEndsBlackholedCalls(t *testing.T) {
	for _, op := range []string{"read", "write"} {
		t.Run(op, func(t *testing.T) {
			l, c, _ := dialEcho(t)
			l.Blackhole()
			defer l.Heal()
			done := make(chan error, 1)
			go func() {
				var err error
				if op == "read" {
					_, err = c.Read(make([]byte, 16))
				} else {
					_, err = c.Write([]byte("ping\n"))
				}
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // the call waits in the blackhole
			c.Close()
			select {
			case err := <-done:
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("blackholed %s after Close = %v; want net.ErrClosed", op, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("a blackholed %s still waits 5s after Close", op)
			}
		})
	}
}
