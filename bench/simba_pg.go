package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	simbapg "github.com/simba-go/simba/backends/postgres"
)

// simbaOnPostgres opens a simba row on the PostgreSQL backend, on the shared
// server: every node a pgxpool of its own (pgx's defaults, dialling through
// the node's path) and a backend on it, all in one fresh schema, with
// MaxLease the lease and release notifications on (the default).
func simbaOnPostgres(election bool) func(ctx context.Context, env *Env) (Target, error) {
	return func(ctx context.Context, env *Env) (Target, error) {
		cfg, err := pgxpool.ParseConfig(env.PostgresDSN)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PostgresEnv, err)
		}
		if err := reachable("PostgreSQL", fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)); err != nil {
			return nil, err
		}
		schema := strings.ReplaceAll(unique("pg"), "-", "_")
		rawSchema := schema + "_raw"
		admin, err := pgx.Connect(ctx, env.PostgresDSN)
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL: %w", err)
		}
		// The raw pair's row, in a schema of its own: the backend's schema
		// holds only the backend's objects.
		for _, q := range []string{
			"CREATE SCHEMA " + rawSchema,
			"CREATE TABLE " + rawSchema + ".raw (id int PRIMARY KEY, holder text)",
			"INSERT INTO " + rawSchema + ".raw VALUES (1, NULL)",
		} {
			if _, err := admin.Exec(ctx, q); err != nil {
				admin.Close(ctx)
				return nil, fmt.Errorf("PostgreSQL: %s: %w", q, err)
			}
		}
		s := simbaStore{
			framing: FramingPostgres,
			newBackend: func(ctx context.Context, net *NodeNet) (backends.Backend, func(), error) {
				pc := cfg.Copy()
				pc.ConnConfig.DialFunc = net.Dial
				pool, err := pgxpool.NewWithConfig(ctx, pc)
				if err != nil {
					return nil, nil, err
				}
				b, err := simbapg.New(pool, simbapg.WithSchema(schema), simbapg.WithMaxLease(Lease))
				if err != nil {
					pool.Close()
					return nil, nil, err
				}
				return b, func() { b.Close(); pool.Close() }, nil
			},
			raw: func(ctx context.Context) (func(ctx context.Context) error, func(), error) {
				c, err := pgx.Connect(ctx, env.PostgresDSN)
				if err != nil {
					return nil, nil, err
				}
				take := "UPDATE " + rawSchema + ".raw SET holder = $1 WHERE id = 1 AND holder IS NULL"
				give := "UPDATE " + rawSchema + ".raw SET holder = NULL WHERE id = 1 AND holder = $1"
				raw := func(ctx context.Context) error {
					for _, q := range []string{take, give} {
						tag, err := c.Exec(ctx, q, "node")
						if err != nil {
							return err
						}
						if tag.RowsAffected() != 1 {
							return fmt.Errorf("%s: %d rows updated; want 1", q, tag.RowsAffected())
						}
					}
					return nil
				}
				return raw, func() { c.Close(context.Background()) }, nil
			},
			cleanup: func() error {
				ctx, cancel := context.WithTimeout(context.Background(), callWithin)
				defer cancel()
				defer admin.Close(ctx)
				_, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				if _, err2 := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+rawSchema+" CASCADE"); err == nil {
					err = err2
				}
				return err
			},
		}
		return newSimbaTarget(s, election), nil
	}
}
