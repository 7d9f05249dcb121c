package simbazk_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	simbazk "github.com/simba-go/simba/backends/zookeeper"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// A zk:// URL opens the ZooKeeper backend with its servers, root and
// options; the closer closes it.
func TestOpenZooKeeper(t *testing.T) {
	servers := testservers.ZooKeeper(t)
	var r [6]byte
	rand.Read(r[:])
	root := "/simbatest-url-" + hex.EncodeToString(r[:])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, c, err := backendurl.Open(ctx, "zk://"+strings.Join(servers, ",")+root+"?simba_max_lease=5s&simba_tick_time=500ms&simba_dial_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	zb, ok := b.(*simbazk.Backend)
	if !ok {
		t.Fatalf("zk:// opened a %T", b)
	}
	if zb.Root() != root || zb.MaxLease() != 5*time.Second || strings.Join(zb.Servers(), ",") != strings.Join(servers, ",") {
		t.Errorf("zk:// opened root %q, maxLease %v, servers %v; want %q, 5s, %v", zb.Root(), zb.MaxLease(), zb.Servers(), root, servers)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("OpenSession after the closer closed = %v; want ErrClosed", err)
	}
}

// §12: credentials in zk:// URLs never appear in an error, whether the
// URL is malformed or the ensemble cannot be reached; an unreachable
// ensemble fails within the call's bound, naming the servers.
func TestOpenZooKeeperErrors(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"zk://u:s3cret@zk1:2181/simba?bogus=1", `simbazk: open zk://u:xxxxx@zk1:2181/simba?…: unknown option "bogus"; want simba_max_lease, simba_tick_time or simba_dial_timeout`},
		{"zk://u:s3cret@zk1:2181/simba?simba_max_lease=soon", `simbazk: open zk://u:xxxxx@zk1:2181/simba?…: option simba_max_lease: want a positive Go duration such as 500ms or 60s`},
		{"zk://u:s3cret@/simba", `simbazk: open zk://u:xxxxx@/simba: no servers; want zk://host:2181[,host2:2181…]/root`},
		{"zk://s3cret@zk1:2181/simba", `simbazk: open zk://xxxxx@zk1:2181/simba: want digest credentials as user:password@`},
		{"zk://zk1:2181/zookeeper/x", `simbazk: open zk://zk1:2181/zookeeper/x: simbazk: WithRoot("/zookeeper/x"): /zookeeper is reserved by ZooKeeper`},
	} {
		b, c, err := backendurl.Open(context.Background(), tt.url)
		if err == nil || b != nil || c != nil {
			t.Errorf("Open(%q) = %v, %v, %v; want an error", tt.url, b, c, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Open(%q) error:\n%s\nwant\n%s", tt.url, err, tt.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %s", tt.url, err)
		}
	}

	// Nothing listens on port 1 of two loopback addresses.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := backendurl.Open(ctx, "zk://u:s3cret@127.0.0.1:1,127.0.0.2:1/simba")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Open of an unreachable ensemble took %v; want it bounded by its context (500ms)", took)
	}
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "127.0.0.2:1") {
		t.Errorf("Open of an unreachable ensemble = %v; want ErrUnavailable naming both servers", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable ensemble leaks the password: %s", err)
	}
}
