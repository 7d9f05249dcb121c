package simbazk

import (
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
)

// The engine end to end on the real ZooKeeper. The fault scenarios (a node's
// path a faultnet link in its dialer; a session expired behind its back by
// expireSession) make go-zookeeper reconnect, which the race detector does
// not survive (see fault_test.go): engineFaults gives their hooks in a build
// without -race, and says why they are skipped in one with it.
func TestEngine(t *testing.T) {
	servers := sharedZK(t)
	lease := testConfig.LeaseDuration
	h := backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend { return newBackend(t, servers, WithMaxLease(lease)) },
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return sameRoot(t, b.(*Backend), servers)
		},
		Lease: lease,
	}
	engineFaults(&h, servers)
	backendtest.RunEngine(t, h)
}
