package simbapg

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
)

// tracer counts the statements a pool runs, by the function they call.
type tracer struct {
	mu    sync.Mutex
	calls map[string]int
}

func (tr *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	fn := data.SQL
	if i := strings.LastIndexByte(fn, '.'); i >= 0 {
		fn = fn[i+1:]
	}
	if i := strings.IndexByte(fn, '('); i >= 0 {
		fn = fn[:i]
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.calls == nil {
		tr.calls = map[string]int{}
	}
	tr.calls[fn]++
	return ctx
}

func (tr *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tr *tracer) count(fn string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.calls[fn]
}

// tracedPool returns a pool of dsn whose statements tr counts.
func tracedPool(t testing.TB, dsn string, tr *tracer) *pgxpool.Pool {
	t.Helper()
	cfg := poolConfig(t, dsn, nil)
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// holdMany gives session id n leases named prefix-0 … prefix-(n-1), written
// straight into the tables (acquiring them one by one would take seconds).
func holdMany(t *testing.T, admin *pgxpool.Pool, b *Backend, id backends.SessionID, prefix string, n int) {
	t.Helper()
	s := ident(b.Schema())
	mustExec(t, admin, "INSERT INTO "+s+".leases (name, session_id, token) SELECT $1 || '-' || i, $2, nextval('"+b.Schema()+".token_seq') FROM generate_series(0, $3 - 1) i",
		prefix, string(id), n)
	mustExec(t, admin, "UPDATE "+s+".sessions SET leases = leases + $2, version = version + $2 WHERE id = $1", string(id), n)
}

func heldBy(t *testing.T, admin *pgxpool.Pool, b *Backend, id backends.SessionID) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(testCtx(t), "SELECT count(*) FROM "+ident(b.Schema())+".leases WHERE session_id = $1", string(id)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func sessionRows(t *testing.T, admin *pgxpool.Pool, b *Backend, id backends.SessionID) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(testCtx(t), "SELECT count(*) FROM "+ident(b.Schema())+".sessions WHERE id = $1", string(id)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// S4: Close of a session that holds more than one call releases (1,000)
// returns after one call, the session dead from it (its leases free to others
// at once); the backend sweeps the rest, one call per thousand.
func TestCloseInBatches(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	var tr tracer
	b := newBackend(t, tracedPool(t, dsn, &tr), admin, WithMaxLease(time.Minute))
	ctx := testCtx(t)
	s := mustOpen(t, b, time.Minute)
	holdMany(t, admin, b, s.ID(), "l", 2500)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.sweeps.Wait()
	if n, rows := heldBy(t, admin, b, s.ID()), sessionRows(t, admin, b, s.ID()); n != 0 || rows != 0 {
		t.Errorf("after Close and its sweep: %d leases still held, %d session rows; want none", n, rows)
	}
	if n := tr.count("close_session"); n != 3 {
		t.Errorf("closing a session of 2,500 leases took %d calls; want 3 (1,000 leases each)", n)
	}
	if _, err := s.KeepAlive(ctx); err == nil {
		t.Error("KeepAlive after Close = nil; want ErrSessionExpired")
	}
}

// S1, S4: a crashed session's leases are released by other sessions'
// renewals, at most 1,000 per call, and are free to others from the moment
// it expired, before they are reaped.
func TestReapInBatches(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b := newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
	ctx := testCtx(t)
	crashed := mustOpen(t, b, time.Minute)
	holdMany(t, admin, b, crashed.ID(), "l", 2500)
	if err := crashed.Join(ctx, "g", 4); err != nil {
		t.Fatal(err)
	}
	live := mustOpen(t, b, time.Minute)
	if err := live.Join(ctx, "g", 4); err != nil {
		t.Fatal(err)
	}
	before, err := live.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := mustOpen(t, b, time.Minute)
	expireSession(t, admin, b.Schema(), crashed.ID())

	// Free before it is reaped: an acquisition ends the holder's session.
	if _, err := other.Acquire(ctx, "l-2499"); err != nil {
		t.Fatalf("Acquire of an expired session's lease: %v", err)
	}
	left := heldBy(t, admin, b, crashed.ID())
	if left != 2499-1000 {
		t.Errorf("after the takeover: the crashed session holds %d leases; want %d (the takeover ends it, 1,000 leases per call)", left, 2499-1000)
	}
	for i := 0; heldBy(t, admin, b, crashed.ID()) > 0 || sessionRows(t, admin, b, crashed.ID()) > 0; i++ {
		if i == 3 {
			t.Fatalf("after %d renewals the crashed session still holds %d leases", i, heldBy(t, admin, b, crashed.ID()))
		}
		if _, err := live.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	v, err := live.Members(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Members) != 1 || v.Members[0] != live.ID() {
		t.Errorf("members after the crashed member was reaped: %v; want only %s", v.Members, live.ID())
	}
	after, err := live.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Digest.Groups == before.Digest.Groups {
		t.Errorf("Digest.Groups %d unchanged after a member's session ended", after.Digest.Groups)
	}
}
