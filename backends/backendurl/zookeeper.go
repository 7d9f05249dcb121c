package backendurl

import (
	"context"
	"io"

	"github.com/simba-go/simba/backends"
	simbazk "github.com/simba-go/simba/backends/zookeeper"
)

// openZooKeeper opens a zk:// URL: zk://[user:password@]host:2181[,host2:2181…][/root][?simba_max_lease=…&simba_tick_time=…&simba_dial_timeout=…]
// (see simbazk.Open). The backend owns its connections; the closer closes
// them.
func openZooKeeper(ctx context.Context, rawURL string) (backends.Backend, io.Closer, error) {
	b, err := simbazk.Open(ctx, rawURL)
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b, b, nil
}
