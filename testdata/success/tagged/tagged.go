//go:build simbagolden

package tagged

import (
	"context"
	"sync/atomic"

	"github.com/simba-go/simba/runtime"
)

// Runs counts the runs of Sync and Export, for the test.
var Runs atomic.Int64

// Sync runs only in builds with the simbagolden tag.
//
//simba:scheduled lease=tagged.sync rate=50ms
func Sync(ctx context.Context, t *runtime.Term) error {
	Runs.Add(1)
	return nil
}

// Exporter is declared under the same constraint as Sync.
type Exporter struct{}

// Export runs on each partition that the node holds.
//
//simba:partitioned group=tagged.export partitions=2 rate=50ms
func (x *Exporter) Export(ctx context.Context, t *runtime.Term, partition int) error {
	Runs.Add(1)
	return nil
}
