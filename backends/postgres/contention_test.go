package simbapg

import (
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// The contention scenarios (backendtest.RunContention) on the shared
// server: backends of one schema, each with its pool and LISTEN connection
// through a faultnet link, as separate processes would have.
func TestContention(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	backendtest.RunContention(t, backendtest.ContentionHarness{
		Lease: testConfig.LeaseDuration,
		Backends: func(t *testing.T, n int) ([]backends.Backend, []backendtest.Path) {
			var first *Backend
			bs, paths := make([]backends.Backend, n), make([]backendtest.Path, n)
			for i := range n {
				link := faultnet.New()
				pool := newPool(t, dsn, link)
				if first == nil {
					first = newBackend(t, pool, admin)
					bs[i] = first
				} else {
					bs[i] = sameSchema(t, first, pool)
				}
				paths[i] = link
			}
			return bs, paths
		},
	})
}
