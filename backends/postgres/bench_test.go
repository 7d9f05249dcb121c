package simbapg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
)

// Benchmarks against the shared PostgreSQL:
//
//	go test -run='^$' -bench=. -benchtime=500x ./backends/postgres/

// statementCounter is a pgx tracer that counts the statementCounter a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// benchHarness describes PostgreSQL to the shared benchmarks: a schema of
// its own on the shared server, on a pool whose statements a pgx tracer
// counts; floors of durable single-row conditional UPDATEs on a table of
// the benchmark's own.
func benchHarness() backendtest.BenchHarness {
	return backendtest.BenchHarness{
		New: func(b *testing.B, maxLease time.Duration) (backends.Backend, []backendtest.Counter) {
			dsn := sharedDSN(b)
			var count statementCounter
			cfg := poolConfig(b, dsn, nil)
			cfg.ConnConfig.Tracer = &count
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			bk := newBackend(b, pool, newPool(b, dsn, nil), WithMaxLease(max(maxLease, time.Minute))) // acquiring 10,000 takes seconds
			statements := func() float64 { return float64(count.n.Load()) }
			return bk, []backendtest.Counter{{Unit: "statements", Read: statements}}
		},
		Same: func(b *testing.B, bk backends.Backend) backends.Backend {
			return sameSchema(b, bk.(*Backend), newPool(b, sharedDSN(b), nil))
		},
		// Two single-row conditional UPDATEs (durable commits) through the
		// backend's own pool.
		AcquireReleaseFloor: func(b *testing.B, bk backends.Backend) backendtest.Floor {
			pool := bk.(*Backend).pool
			table, _ := rawTable(b, bk.(*Backend), 0)
			return func(i int) string {
				for range 2 {
					if _, err := pool.Exec(context.Background(), "UPDATE "+table+" SET token = $1 WHERE id = 1 AND token <= $1", int64(i)); err != nil {
						b.Fatal(err)
					}
				}
				return "raw-pair"
			}
		},
		// After the same idle as the hand-off: on even rounds two UPDATEs on
		// one connection (the comparison's floor, where the second round
		// trip finds the connection warm), on odd rounds one on each of two
		// connections, both idle like the holder's and the waiter's: the
		// hand-off's floor.
		HandOffFloor: func(b *testing.B, bk backends.Backend) backendtest.Floor {
			table, conns := rawTable(b, bk.(*Backend), 2)
			return func(i int) string {
				rawUpdate(b, conns[0], table, i)
				rawUpdate(b, conns[i%2], table, i)
				if i%2 == 0 {
					return "raw-pair"
				}
				return "raw-two-conns"
			}
		},
	}
}

// rawTable creates a one-row table beside bk's schema, dropped when the
// benchmark ends, and returns its name and n connections of a pool of its
// own.
func rawTable(b *testing.B, bk *Backend, n int) (string, []*pgxpool.Conn) {
	b.Helper()
	dsn := sharedDSN(b)
	admin := newPool(b, dsn, nil)
	table := pgx.Identifier{bk.Schema() + "_raw"}.Sanitize()
	mustExec(b, admin, "CREATE TABLE "+table+" (id int PRIMARY KEY, token bigint NOT NULL)")
	b.Cleanup(func() { mustExec(b, admin, "DROP TABLE "+table) })
	mustExec(b, admin, "INSERT INTO "+table+" VALUES (1, 0)")
	raw := newPool(b, dsn, nil)
	conns := make([]*pgxpool.Conn, n)
	for i := range conns {
		c, err := raw.Acquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Release)
		conns[i] = c
	}
	return table, conns
}

// rawUpdate is one durable single-row conditional UPDATE.
func rawUpdate(b *testing.B, c *pgxpool.Conn, table string, i int) {
	if _, err := c.Exec(context.Background(), "UPDATE "+table+" SET token = $1 WHERE id = 1 AND token <= $1", int64(i)); err != nil {
		b.Fatal(err)
	}
}

// S1: a keep-alive is one statement whatever the number of leases held, and
// its time is flat in it: it touches the session's row and the groups it
// joined, never its leases (statements/op, counted by a pgx tracer; p50-µs).
func BenchmarkKeepAlive(b *testing.B) { backendtest.BenchmarkKeepAlive(b, benchHarness()) }

// Acquire+release beside the raw floor, two durable single-row conditional
// UPDATEs, each pair measured next to the other: the medians and their
// ratio.
func BenchmarkAcquireRelease(b *testing.B) { backendtest.BenchmarkAcquireRelease(b, benchHarness()) }

// Graceful hand-offs: at the backend level, beside its floors on one and on
// two idle connections (raw-pair-p50-µs, raw-two-conns-p50-µs), and through
// the engine.
//
//	go test -run='^$' -bench=HandOff -benchtime=100x ./backends/postgres/
func BenchmarkHandOff(b *testing.B) { backendtest.BenchmarkHandOff(b, benchHarness()) }

// The watcher process of BenchmarkWatchHolderTurns finds the schema the
// parent made through these.
const (
	watchDSNEnv      = "SIMBAPG_WATCH_DSN"
	watchSchemaEnv   = "SIMBAPG_WATCH_SCHEMA"
	watchMaxLeaseEnv = "SIMBAPG_WATCH_MAXLEASE"
)

// BenchmarkWatchHolderTurns: WatchHolder in a second process reports every
// one of b.N lock turns of 2 ms, in order (backends.HolderNotifier); see
// backendtest.BenchmarkWatchHolderTurns.
//
//	go test -run='^$' -bench=WatchHolderTurns -benchtime=100x ./backends/postgres/
func BenchmarkWatchHolderTurns(b *testing.B) {
	dsn := sharedDSN(b)
	bk := newBackend(b, newPool(b, dsn, nil), newPool(b, dsn, nil))
	backendtest.BenchmarkWatchHolderTurns(b, bk, func(string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), watchDSNEnv+"="+dsn, watchSchemaEnv+"="+bk.Schema(),
			watchMaxLeaseEnv+"="+bk.MaxLease().String())
		return cmd
	})
}

// watchTurnsChild is the watcher process of BenchmarkWatchHolderTurns.
func watchTurnsChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "watcher:", err)
		return 1
	}
	lease, err := time.ParseDuration(os.Getenv(watchMaxLeaseEnv))
	if err != nil {
		return fail(err)
	}
	pool, err := pgxpool.New(context.Background(), os.Getenv(watchDSNEnv))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	b, err := New(pool, WithSchema(os.Getenv(watchSchemaEnv)), WithMaxLease(lease))
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	return backendtest.WatchTurnsChild(b)
}
