package simbamysql

import (
	"context"
	"database/sql"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
)

// Benchmarks against the shared MariaDB: the three every backend shares
// (package backendtest, described by benchHarness), each also run with the
// release poll alone (no bell) and with neither, to show what each
// notification path achieves:
//
//	go test -run='^$' -bench=. -benchtime=500x ./backends/mysql/
//	go test -run='^$' -bench=HandOff -benchtime=100x ./backends/mysql/

// commandCounter counts the commands a pool sends: MySQL packets that start
// a command (sequence number 0), each one round trip.
type commandCounter struct{ n atomic.Int64 }

// dial is a go-sql-driver DialFunc whose connections count the commands
// written.
func (c *commandCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

type countingConn struct {
	net.Conn
	c *commandCounter
}

func (cc *countingConn) Write(p []byte) (int, error) {
	for b := p; len(b) >= 4; {
		size := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if b[3] == 0 {
			cc.c.n.Add(1)
		}
		if 4+size > len(b) {
			break
		}
		b = b[4+size:]
	}
	return cc.Conn.Write(p)
}

// countedDB returns a pool of the shared database whose commands c counts.
func countedDB(b *testing.B, rawURL string, c *commandCounter) *sql.DB {
	cfg := driverCfg(b, rawURL)
	cfg.DialFunc = c.dial
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(8)
	b.Cleanup(func() { db.Close() })
	return db
}

// benchHarness describes MySQL to the shared benchmarks: tables of a prefix
// of their own on the shared server, on a pool whose commands are counted on
// the wire (a keep-alive must be exactly one); floors of durable single-row
// conditional UPDATEs on a table of the benchmark's own. With bells, every
// backend has them on a pool of its own, as [Open] makes them (not
// counted); opts configure every backend.
func benchHarness(bells bool, opts ...Option) backendtest.BenchHarness {
	with := func(b *testing.B) []Option {
		if bells {
			return append([]Option{withBellDB(newDB(b, sharedURL(b), nil))}, opts...)
		}
		return opts
	}
	return backendtest.BenchHarness{
		New: func(b *testing.B, maxLease time.Duration) (backends.Backend, []backendtest.Counter) {
			url := sharedURL(b)
			var count commandCounter
			bk := newBackend(b, countedDB(b, url, &count), newDB(b, url, nil),
				append([]Option{WithMaxLease(max(maxLease, time.Minute))}, with(b)...)...)
			commands := func() float64 { return float64(count.n.Load()) }
			return bk, []backendtest.Counter{{Unit: "statements", Read: commands, PerKeepAlive: 1}}
		},
		Same: func(b *testing.B, bk backends.Backend) backends.Backend {
			return samePrefix(b, bk.(*Backend), newDB(b, sharedURL(b), nil), with(b)...)
		},
		KeepAliveLeases: []int{1, 100, 1000},
		// Two single-row conditional UPDATEs (durable commits: each changes
		// the row, since InnoDB writes nothing for an UPDATE that changes
		// nothing), prepared once, on a connection of their own.
		AcquireReleaseFloor: func(b *testing.B, bk backends.Backend) backendtest.Floor {
			_, conns := rawTable(b, bk.(*Backend), 1)
			return func(i int) string {
				rawUpdate(b, conns[0], 2*i)
				rawUpdate(b, conns[0], 2*i+1)
				return "raw-pair"
			}
		},
		// After the same idle as the hand-off: on even rounds two UPDATEs on
		// one connection (the comparison's floor), on odd rounds one on each
		// of two connections, both idle like the holder's and the waiter's:
		// the hand-off's floor.
		HandOffFloor: func(b *testing.B, bk backends.Backend) backendtest.Floor {
			_, conns := rawTable(b, bk.(*Backend), 2)
			return func(i int) string {
				rawUpdate(b, conns[0], 2*i)
				rawUpdate(b, conns[i%2], 2*i+1)
				if i%2 == 0 {
					return "raw-pair"
				}
				return "raw-two-conns"
			}
		},
	}
}

// rawTable creates a one-row table beside bk's tables, dropped when the
// benchmark ends, and returns its name and, on each of n connections of a
// pool of its own, its conditional UPDATE prepared (one round trip, as the
// backend's own calls are).
func rawTable(b *testing.B, bk *Backend, n int) (string, []*sql.Stmt) {
	b.Helper()
	url := sharedURL(b)
	admin := newDB(b, url, nil)
	table := bk.Prefix() + "_raw"
	mustExec(b, admin, "CREATE TABLE "+table+" (id INT PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB")
	b.Cleanup(func() { mustExec(b, admin, "DROP TABLE "+table) })
	mustExec(b, admin, "INSERT INTO "+table+" VALUES (1, 0)")
	raw := newDB(b, url, nil)
	ctx := context.Background()
	stmts := make([]*sql.Stmt, n)
	for i := range stmts {
		c, err := raw.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		st, err := c.PrepareContext(ctx, "UPDATE "+table+" SET token = ? WHERE id = 1 AND token <= ?")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		stmts[i] = st
	}
	return table, stmts
}

// rawUpdate is one durable single-row conditional UPDATE: the token grows
// with i, so the row changes.
func rawUpdate(b *testing.B, st *sql.Stmt, i int) {
	if _, err := st.ExecContext(context.Background(), int64(i), int64(i)); err != nil {
		b.Fatal(err)
	}
}

// S1: a keep-alive is one statement (one round trip: one CALL) whatever the
// number of leases held, and its time is flat in it: it touches the
// session's row and the groups it joined, never its leases
// (statements/op, counted on the wire; p50-µs). The bells of the leases
// held go on a pool of their own.
func BenchmarkKeepAlive(b *testing.B) { backendtest.BenchmarkKeepAlive(b, benchHarness(true)) }

// Acquire+release beside the raw floor, two durable single-row conditional
// UPDATEs, each pair measured next to the other: the medians and their
// ratio. With bells, as Open's backends have them: a lease released within
// bellHoldAfter of its grant never takes its bell.
func BenchmarkAcquireRelease(b *testing.B) {
	backendtest.BenchmarkAcquireRelease(b, benchHarness(true))
}

// Graceful hand-offs with Open's defaults (the poll and the bells): at the
// backend level, beside its floors on one and on two idle connections
// (raw-pair-p50-µs, raw-two-conns-p50-µs), and through the engine.
func BenchmarkHandOff(b *testing.B) { backendtest.BenchmarkHandOff(b, benchHarness(true)) }

// The same hand-offs with the release poll alone: New's default, without
// bells.
func BenchmarkHandOffPollOnly(b *testing.B) { backendtest.BenchmarkHandOff(b, benchHarness(false)) }
