package main

import (
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/runtime"
)

// The example runs to its end: the partitions are rebalanced as a node
// leaves and another joins, and no stale holder settles a partition.
func TestRun(t *testing.T) {
	var out logtext.Buffer
	err := run(cluster.Options{Backend: "memory:billing-test", Nodes: 3, For: 3 * time.Second, Config: runtime.Config{LeaseDuration: time.Second}, Out: &out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	log := out.String()
	for _, want := range []string{"node-4 joins", "node-4: ", "0 made by a stale holder"} {
		if !strings.Contains(log, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, log)
		}
	}
}
