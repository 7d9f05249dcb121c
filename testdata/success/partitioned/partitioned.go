// Package partitioned covers //simba:partitioned (G1): a fixed rate, a
// fixed delay, and neither, which runs once per term of each partition.
package partitioned

import (
	"context"
	"sync"

	"github.com/simba-go/simba/runtime"
)

// Seen records the partitions Index ran for, for the test.
var Seen sync.Map

// Index runs once per term of each of the 4 partitions this node holds.
//
//simba:partitioned group=partitioned.index partitions=4
func Index(ctx context.Context, t *runtime.Term, partition int) error {
	Seen.Store(partition, t.Token())
	return nil
}

// Settle runs every 30s on each partition held, after an initial 5s.
//
//simba:partitioned group=partitioned.settle partitions=16 rate=30s initial=5s
func Settle(ctx context.Context, t *runtime.Term, partition int) error { return nil }

// Compact has one partition: a group of one is a lease that moves between
// members.
//
//simba:partitioned group=partitioned.compact partitions=1 delay=2m step=500ms
func Compact(ctx context.Context, t *runtime.Term, partition int) error { return nil }
