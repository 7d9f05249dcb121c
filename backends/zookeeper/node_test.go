package simbazk

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 3 s lease,
// renewed every second.
var testConfig = runtime.ConfigFor(3 * time.Second)

// node is one runtime client contending for one lease, recording its terms
// and the engine's events.
type node = enginetest.Node

// termRecord is what a node saw of one term.
type termRecord = enginetest.TermRecord

// startNode starts a client on b with cfg and an election for lease.
func startNode(t *testing.T, name string, b backends.Backend, cfg runtime.Config, lease string) *node {
	t.Helper()
	return enginetest.StartNode(t, name, b, cfg, lease)
}
