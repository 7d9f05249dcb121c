package main

import (
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/runtime"
)

// The example runs to its end: the leader is stopped and another takes
// over, the next steps down and a third takes over, and no slot runs twice.
func TestRun(t *testing.T) {
	var out logtext.Buffer
	err := run(cluster.Options{Backend: "memory:report-test", Nodes: 3, For: 4500 * time.Millisecond, Config: runtime.Config{LeaseDuration: time.Second}, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	log := out.String()
	for _, want := range []string{"stopping node-", "steps down for", "no slot ran twice", "runs the digest of the", "cron slots, each once"} {
		if !strings.Contains(log, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, `is elected: it holds "report"`); n < 3 {
		t.Errorf("%d leaders in the timeline; want 3:\n%s", n, log)
	}
}
