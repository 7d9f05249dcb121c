package simbaredis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
)

// Read-only tools only read (§12): OpenInspector and Inspect leave every
// key of the namespace as they found it (DUMP, byte for byte).
func TestInspectorWritesNothing(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
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
	before := dumpKeys(t, admin, b.keys)

	in, closer, err := backendurl.OpenInspector(ctx, "redis://"+addr+"/0?simba_prefix="+b.Prefix())
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
	if after := dumpKeys(t, admin, b.keys); after != before {
		t.Errorf("the namespace changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// dumpKeys describes every key of a namespace: its name and its DUMP,
// sorted.
func dumpKeys(t *testing.T, c *redis.Client, l layout) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lines []string
	iter := c.Scan(ctx, 0, l.pattern(), 1000).Iterator()
	for iter.Next(ctx) {
		d, err := c.Dump(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", iter.Val(), err)
		}
		lines = append(lines, fmt.Sprintf("%s %q", iter.Val(), d))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
