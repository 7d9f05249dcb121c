package simbazk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
)

// Read-only tools only read (§12): OpenInspector and Inspect leave the
// root's tree as they found it — every node's data and Stat (mzxid,
// pzxid, versions) — and a root that does not exist lists as empty and is
// not created. (simba status created the root and wrote its clock node.)
func TestInspectorWritesNothing(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	b := newBackend(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 10 * time.Second, Identity: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	g, err := s.Acquire(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutValue(ctx, "report", g.Token, []byte("slot 7")); err != nil {
		t.Fatal(err)
	}
	if err := s.Join(ctx, "billing", 2); err != nil {
		t.Fatal(err)
	}
	c := directConn(t, servers)
	before := tree(t, c, b.Root())

	in, closer, err := backendurl.OpenInspector(ctx, "zk://"+strings.Join(servers, ",")+b.Root())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := in.Inspect(ctx)
	closer.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Leases) != 1 || inv.Leases[0].Name != "report" || string(inv.Leases[0].Value) != "slot 7" || len(inv.Groups) != 1 {
		t.Errorf("Inspect = %+v; want the lease report with its value, and the group billing", inv)
	}
	if after := tree(t, c, b.Root()); after != before {
		t.Errorf("the tree under %s changed:\nbefore:\n%s\nafter:\n%s", b.Root(), before, after)
	}

	missing := uniqueRoot()
	in, closer, err = backendurl.OpenInspector(ctx, "zk://"+strings.Join(servers, ",")+missing)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.(backends.Backend).OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("OpenSession of a backend opened for listing = %v; want ErrReadOnly", err)
	}
	inv, err = in.Inspect(ctx)
	closer.Close()
	if err != nil || len(inv.Sessions)+len(inv.Leases)+len(inv.Groups) != 0 {
		t.Errorf("Inspect of a root that does not exist = %+v, %v; want nothing", inv, err)
	}
	if nodeExists(t, c, missing) {
		deleteTree(t, servers, missing, "")
		t.Errorf("OpenInspector and Inspect created the root %s", missing)
	}
}

// tree describes every node under path: its path, data and Stat, sorted.
func tree(t *testing.T, c *zk.Conn, path string) string {
	t.Helper()
	var lines []string
	var walk func(p string)
	walk = func(p string) {
		data, st, err := c.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("Get(%s): %v", p, err)
		}
		lines = append(lines, fmt.Sprintf("%s %q %+v", p, data, *st))
		children, _, err := c.Children(p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("Children(%s): %v", p, err)
		}
		for _, child := range children {
			walk(p + "/" + child)
		}
	}
	walk(path)
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
