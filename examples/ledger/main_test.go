package main

import (
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/examples/internal/cluster"
)

// The example runs to its end: the frozen leader's late write is rejected
// by the fenced ledger (SPEC F1, E2).
func TestRun(t *testing.T) {
	var out cluster.Buffer
	err := run(cluster.Options{Backend: "memory:ledger-test", Nodes: 3, For: 6 * time.Second, Lease: time.Second, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	log := out.String()
	for _, want := range []string{"freezes before writing", "expires node-", "the ledger REJECTS", "1 stale write(s) rejected"} {
		if !strings.Contains(log, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, log)
		}
	}
}
