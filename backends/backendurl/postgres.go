package backendurl

import (
	"context"
	"io"

	"github.com/simba-go/simba/backends"
	simbapg "github.com/simba-go/simba/backends/postgres"
)

// openPostgres opens a postgres:// or postgresql:// URL with simbapg.Open:
// pgx reads the URL and its parameters, except the backend's own, which
// simbapg.Open takes out first:
//
//	simba_schema=NAME          the schema (default simba)
//	simba_max_lease=DURATION   the longest lease, and the amnesia guard (default 60s)
//	simba_migrate=false        do not create the schema; only check it
//	simba_notifications=false  no LISTEN/NOTIFY: candidates take over at their next attempt
//
// The URL must name a host. Its password never appears in an error,
// whatever characters it holds (a "/", "#", "?" or "@" needs no escaping).
func openPostgres(ctx context.Context, rawURL string) (backends.Backend, io.Closer, error) {
	b, err := simbapg.Open(ctx, rawURL)
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b, b, nil
}
