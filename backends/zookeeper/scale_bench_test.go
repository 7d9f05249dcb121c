package simbazk

import (
	"testing"

	"github.com/simba-go/simba/backends/backendtest"
)

// BenchmarkHeldLeases measures one client leading many elections on
// ZooKeeper with the default timings (15 s lease): how long until every
// lease is held, the renewals meanwhile and after, and Close (see
// backendtest.BenchmarkHeldLeases). The number of leases is
// SIMBA_BENCH_LEASES (default 10,000), capped at 100,000, the target
// on ZooKeeper: each lease is an ephemeral node that the ensemble keeps in
// memory and writes to its log, and a session's nodes are all deleted when
// it closes.
//
//	SIMBA_BENCH_LEASES=100000 go test -run='^$' -bench=HeldLeases -benchtime=1x -timeout=30m ./backends/zookeeper/
func BenchmarkHeldLeases(b *testing.B) {
	h := benchHarness()
	h.MaxHeldLeases = 100_000
	backendtest.BenchmarkHeldLeases(b, h)
}
