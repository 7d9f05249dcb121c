package simbapg

import (
	"testing"

	"github.com/simba-go/simba/backends/backendtest"
)

// BenchmarkHeldLeases measures one client leading many elections on
// PostgreSQL with the default timings (15 s lease; the backend's MaxLease
// is a minute): how long until every lease is held, the renewals meanwhile
// and after, and Close (see backendtest.BenchmarkHeldLeases). The number of
// leases is SIMBA_BENCH_LEASES (default 10,000):
//
//	SIMBA_BENCH_LEASES=1000000 go test -run='^$' -bench=HeldLeases -benchtime=1x -timeout=30m ./backends/postgres/
func BenchmarkHeldLeases(b *testing.B) { backendtest.BenchmarkHeldLeases(b, benchHarness()) }
