package simbamysql

import (
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// The contention scenarios (backendtest.RunContention) on the shared
// server: backends of one prefix, each with its pool and release poll
// through a faultnet link, as separate processes would have.
func TestContention(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	backendtest.RunContention(t, backendtest.ContentionHarness{
		Lease: testConfig.LeaseDuration,
		Backends: func(t *testing.T, n int) ([]backends.Backend, []backendtest.Path) {
			var first *Backend
			bs, paths := make([]backends.Backend, n), make([]backendtest.Path, n)
			for i := range n {
				link := faultnet.New()
				db := newDB(t, url, link)
				if first == nil {
					first = newBackend(t, db, admin)
					bs[i] = first
				} else {
					bs[i] = samePrefix(t, first, db)
				}
				paths[i] = link
			}
			return bs, paths
		},
	})
}
