package simbapg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// inspectPage is how many rows Inspect reads per statement, so that no
// statement holds the database for long however much the schema holds.
const inspectPage = 1000

// Inspect lists the schema's live sessions, the leases they hold and the
// groups with live members ([backends.Inspector]), in pages of 1,000 rows per
// statement, each read by a function of the schema (a role needs no rights on
// the tables). It changes nothing. The lists are read close together, not as
// one snapshot.
func (b *Backend) Inspect(ctx context.Context) (backends.Inventory, error) {
	var inv backends.Inventory
	if b.closed.Load() {
		return inv, b.errorf("inspect", "", "%w", backends.ErrClosed)
	}
	if err := b.ensureSchema(ctx); err != nil {
		return inv, err
	}
	var err error
	inv.Sessions, err = pages(ctx, b, b.sql.inspectSessions, func(rows pgx.Rows) (backends.SessionInfo, string, error) {
		var (
			s         backends.SessionInfo
			id        string
			remaining int64
			leases    int32
			now       time.Time
		)
		err := rows.Scan(&id, &s.Identity, &remaining, &leases, &now)
		s.ID, s.Remaining, s.Leases = backends.SessionID(id), max(0, time.Duration(remaining)*time.Microsecond), int(leases)
		if inv.StoreTime.IsZero() {
			inv.StoreTime = now.UTC()
		}
		return s, id, err
	})
	if err != nil {
		return inv, err
	}
	if inv.StoreTime.IsZero() {
		if inv.StoreTime, err = b.StoreTime(ctx); err != nil {
			return inv, err
		}
	}
	// The amnesia guard: no lease is granted before guard_from + MaxLease
	// (meta, which every role may read), with this backend's MaxLease.
	// guard_from is -infinity where the guard is off (WithoutGuard).
	var sinceUS *int64
	if err := b.retry(ctx, "inspect", "", func() error {
		return b.pool.QueryRow(ctx, b.sql.guard).Scan(&sinceUS)
	}); err != nil {
		if !errors.Is(err, backends.ErrUnavailable) {
			err = storeerr.Unavailable(ctx, "simbapg", "inspect", err)
		}
		return inv, err
	}
	if left := time.Duration(deref(sinceUS))*time.Microsecond + b.maxLease; sinceUS != nil && left > 0 {
		inv.Recovering = &backends.RecoveringError{Remaining: left, Until: inv.StoreTime.Add(left), MaxLease: b.maxLease,
			Why: fmt.Sprintf(whyRecovering, b.schema)}
	}
	inv.Leases, err = pages(ctx, b, b.sql.inspectLeases, func(rows pgx.Rows) (backends.LeaseInfo, string, error) {
		var (
			l      backends.LeaseInfo
			holder string
			tok    int64
		)
		err := rows.Scan(&l.Name, &holder, &l.Identity, &tok, &l.Value)
		l.Session, l.Token = backends.SessionID(holder), backends.Token(tok)
		return l, l.Name, err
	})
	if err != nil {
		return inv, err
	}
	inv.Groups, err = pages(ctx, b, b.sql.inspectGroups, func(rows pgx.Rows) (backends.GroupInfo, string, error) {
		var (
			g       backends.GroupInfo
			parts   int32
			members []string
		)
		err := rows.Scan(&g.Name, &parts, &members)
		g.Partitions = int(parts)
		for _, m := range members {
			g.Members = append(g.Members, backends.SessionID(m))
		}
		return g, g.Name, err
	})
	return inv, err
}

// pages reads every page of one of the inspect functions, which take the key
// (id or name) to start after and a page size; scan reads one row and returns
// its key.
func pages[T any](ctx context.Context, b *Backend, sql string, scan func(pgx.Rows) (T, string, error)) ([]T, error) {
	var all []T
	for after := ""; ; {
		var (
			page []T
			last string
		)
		err := b.retry(ctx, "inspect", "", func() error {
			page, last = page[:0], after
			rows, err := b.pool.Query(ctx, sql, after, inspectPage)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				item, key, err := scan(rows)
				if err != nil {
					return err
				}
				page, last = append(page, item), key
			}
			return rows.Err()
		})
		if err != nil {
			if !errors.Is(err, backends.ErrUnavailable) { // the schema is gone
				b.ready.Store(false)
				err = storeerr.Unavailable(ctx, "simbapg", "inspect", err)
			}
			return all, err
		}
		all = append(all, page...)
		if len(page) < inspectPage {
			return all, nil
		}
		after = last
	}
}

// pgInspector lists a PostgreSQL schema read-only, opening the backend once
// the schema exists.
type pgInspector struct {
	url    string
	logger *slog.Logger

	mu sync.Mutex
	b  *Backend
}

func (p *pgInspector) open(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b != nil {
		return nil
	}
	b, err := Open(ctx, p.url, WithoutMigration(), WithNotifications(false), WithLogger(p.logger))
	if err != nil {
		return err
	}
	p.b = b
	return nil
}

// OpenSession refuses: the backend is opened for listing only.
func (p *pgInspector) OpenSession(context.Context, backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return nil, backends.Renewal{}, errors.New("simbapg: open session: backend opened for listing only (backendurl.OpenInspector)")
}

// Inspect lists the schema, or nothing while it does not exist.
func (p *pgInspector) Inspect(ctx context.Context) (backends.Inventory, error) {
	if err := p.open(ctx); errors.Is(err, ErrNoSchema) {
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
