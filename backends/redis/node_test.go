package simbaredis

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 2 s lease,
// renewed every 667 ms; the local validity is 2 s × 0.99 − 50 ms = 1.93 s.
var testConfig = runtime.ConfigFor(2 * time.Second)

// sameNamespace returns another backend on the namespace of b, through
// client: another node of the same cluster.
func sameNamespace(t testing.TB, b *Backend, client redis.UniversalClient, opts ...Option) *Backend {
	t.Helper()
	nb, err := New(client, append([]Option{WithPrefix(b.Prefix()), WithMaxLease(b.MaxLease())}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { nb.Close() })
	return nb
}

// newCluster returns the nodes of a test, with testConfig; their terms are
// checked when the test ends (never two valid at once, tokens rising).
func newCluster(t *testing.T) *enginetest.Cluster { return enginetest.NewCluster(t, testConfig) }

// termRecord is what a node saw of one term.
type termRecord = enginetest.TermRecord
