package simbazk

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// WithDigest: the credentials are in place before the first request of a
// connection, so that every open succeeds. Each Open is a backend of its own
// whose first request after the credentials is a write of the root's clock
// node, which only the digest may write: thirty in a row, all succeed. (The
// credentials were added on a goroutine of their own, racing that write:
// several opens in thirty failed with "not authorized".)
func TestDigestOpens(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	root := uniqueRoot()
	t.Cleanup(func() { deleteTree(t, servers, root, "simba:p@ss/w0rd") })
	url := "zk://simba:p@ss/w0rd@" + strings.Join(servers, ",") + root
	for i := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := Open(ctx, url)
		cancel()
		if err != nil {
			t.Fatalf("open %d of 30: %v", i+1, err)
		}
		b.Close()
	}
	// The ACL is in force: without the credentials, the first write is
	// refused.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b, err := Open(ctx, "zk://"+strings.Join(servers, ",")+root); !errors.Is(err, ErrNotAuthorized) {
		if err == nil {
			b.Close()
		}
		t.Errorf("Open without the credentials = %v; want ErrNotAuthorized (the root's nodes take writes from the digest only)", err)
	}
}

// WithDigest: go-zookeeper sends the credentials again first on every
// reconnection, so that a session whose connection broke and came back
// still writes under the digest's ACL.
func TestDigestAfterReconnect(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	link := faultnet.New()
	b := newBackend(t, servers, WithDigest("simba", "s3cret"), WithDialer(link.DialTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Acquire(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	zs := zkSession(t, s)
	before := zs.w.current()
	link.Cut()
	time.Sleep(200 * time.Millisecond)
	link.Heal()
	// The first call may meet the broken connection; the next ones wait
	// for the new one.
	for i := 0; ; i++ {
		_, err := s.KeepAlive(ctx)
		if err == nil {
			break
		}
		if i == 2 || !errors.Is(err, backends.ErrUnavailable) {
			t.Fatalf("KeepAlive after the connection came back: %v", err)
		}
	}
	if zs.w.current() == before {
		t.Fatal("the session did not reconnect; the test proves nothing")
	}
	if _, err := s.Acquire(ctx, "after"); err != nil {
		t.Errorf("Acquire after a reconnection = %v; want the lease (the credentials sent again first)", err)
	}
}
