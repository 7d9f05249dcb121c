package backendurl

import (
	"context"
	"errors"
	"io"
	"sync"

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
//
// Read-only (OpenInspector), it neither creates nor migrates the schema and
// does not LISTEN; a schema that does not exist yet lists as empty, and is
// opened once it does.
func openPostgres(ctx context.Context, rawURL string, readOnly bool) (backends.Backend, io.Closer, error) {
	if readOnly {
		in := &pgInspector{url: rawURL}
		if err := in.open(ctx); err != nil && !errors.Is(err, simbapg.ErrNoSchema) {
			return nil, nil, err
		}
		return in, in, nil
	}
	b, err := simbapg.Open(ctx, rawURL)
	if err != nil {
		return nil, nil, err // Open redacts the URL itself
	}
	return b, b, nil
}

// pgInspector lists a PostgreSQL schema read-only, opening the backend once
// the schema exists.
type pgInspector struct {
	url string

	mu sync.Mutex
	b  *simbapg.Backend
}

var roOptions = []simbapg.Option{simbapg.WithoutMigration(), simbapg.WithNotifications(false)}

func (p *pgInspector) open(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b != nil {
		return nil
	}
	b, err := simbapg.Open(ctx, p.url, roOptions...)
	if err != nil {
		return err
	}
	p.b = b
	return nil
}

// OpenSession refuses: the backend is opened for listing only.
func (p *pgInspector) OpenSession(context.Context, backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return nil, backends.Renewal{}, errors.New("simba: open session: backend opened for listing only (backendurl.OpenInspector)")
}

// Inspect lists the schema, or nothing while it does not exist.
func (p *pgInspector) Inspect(ctx context.Context) (backends.Inventory, error) {
	if err := p.open(ctx); errors.Is(err, simbapg.ErrNoSchema) {
		return backends.Inventory{}, nil
	} else if err != nil {
		return backends.Inventory{}, err
	}
	return p.b.Inspect(ctx)
}

// Close closes the backend, if it was opened.
func (p *pgInspector) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b == nil {
		return nil
	}
	return p.b.Close()
}
