package main

import (
	"strings"
	"testing"
	"time"

	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// The example runs to its end on each backend: the leader freezes (its calls
// to the store held, as a paused process's are), its term ends at its
// deadline, another node takes over, and the frozen leader's late write is
// rejected by the fenced ledger (F1, E2).
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
			// A namespace written by another version of the backend, left by
			// another checkout on this shared server, makes Open fail with
			// simbaredis.ErrLayout, as it should; start from none.
			testservers.ClearRedis(t, addr, 14, "{"+simbaredis.DefaultPrefix+"}:*")
			return "redis://" + addr + "/14"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out logtext.Buffer
			err := run(cluster.Options{Backend: c.backend(t), Nodes: 3, For: 6 * time.Second, Config: runtime.Config{LeaseDuration: time.Second}, Out: &out})
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
