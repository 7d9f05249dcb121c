package simbazk

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 3 s lease,
// renewed every second.
var testConfig = runtime.ConfigFor(3 * time.Second)

// newCluster returns the nodes of a test, with cfg: every term they hold is
// recorded, and checked when the test ends (no two valid at once, tokens
// rising, callbacks paired).
func newCluster(t *testing.T, cfg runtime.Config) *enginetest.Cluster {
	return enginetest.NewCluster(t, cfg)
}

// termRecord is what a node saw of one term.
type termRecord = enginetest.TermRecord
