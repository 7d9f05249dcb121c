package simbapg

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 2 s lease,
// renewed every 667 ms; the local validity is 2 s × 0.99 − 50 ms = 1.93 s.
var testConfig = runtime.ConfigFor(2 * time.Second)

// newCluster returns the nodes of a test, with testConfig: every term they
// hold is recorded, and checked when the test ends — no two terms of one
// name valid at once (T2, D3), tokens strictly increasing in the order terms
// began (F5), callbacks in pairs (L1).
func newCluster(t *testing.T) *enginetest.Cluster { return enginetest.NewCluster(t, testConfig) }
