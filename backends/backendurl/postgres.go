package backendurl

import (
	"context"
	"io"

	"github.com/simba-go/simba/backends"
)

// openPostgres opens a postgres:// or postgresql:// URL.
func openPostgres(ctx context.Context, rawURL string) (backends.Backend, io.Closer, error) {
	return nil, nil, notBuilt(rawURL, "PostgreSQL")
}
