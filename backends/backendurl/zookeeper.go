package backendurl

import (
	"context"
	"io"

	"github.com/simba-go/simba/backends"
)

// openZooKeeper opens a zk:// URL.
func openZooKeeper(ctx context.Context, rawURL string) (backends.Backend, io.Closer, error) {
	return nil, nil, notBuilt(rawURL, "ZooKeeper")
}
