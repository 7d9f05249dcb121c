package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/internal/testservers"
)

// The example runs to its end on each backend: the leader freezes (its calls
// to the store held, as a paused process's are), its term ends at its
// deadline, another node takes over, and the frozen leader's late write is
// rejected by the fenced ledger (SPEC F1, E2).
func TestRun(t *testing.T) {
	for _, c := range []struct {
		name    string
		backend func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "memory:ledger-test" }},
		// Database 14: the other tests use 0, and the lease "ledger" is the
		// example's own.
		{"redis", func(t *testing.T) string {
			addr := testservers.Redis(t)
			freshNamespace(t, addr, 14)
			return "redis://" + addr + "/14"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out cluster.Buffer
			err := run(cluster.Options{Backend: c.backend(t), Nodes: 3, For: 6 * time.Second, Lease: time.Second, Out: &out})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			log := out.String()
			for _, want := range []string{"freezes for", "ends: deadline passed", "the ledger REJECTS", "1 stale write(s) rejected"} {
				if !strings.Contains(log, want) {
					t.Errorf("the timeline lacks %q:\n%s", want, log)
				}
			}
			if n := strings.Count(log, `is elected: it holds "ledger"`); n < 2 {
				t.Errorf("%d elections in the timeline; want at least 2 (the take-over):\n%s", n, log)
			}
		})
	}
}

// freshNamespace deletes the keys of the Redis backend's default namespace in
// database db, before the test and after it. The server is shared with other
// checkouts of this module, and a namespace written by another version of the
// backend makes Open fail with simbaredis.ErrLayout, as it should.
func freshNamespace(t *testing.T, addr string, db int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	clear := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var keys []string
		iter := c.Scan(ctx, 0, "{"+simbaredis.DefaultPrefix+"}:*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("scanning the default namespace: %v", err)
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Fatalf("deleting the default namespace: %v", err)
			}
		}
	}
	clear()
	t.Cleanup(func() { clear(); c.Close() })
}
