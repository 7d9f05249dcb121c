package simbaredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// §15, T2, F5: Redis restarts without its data (SHUTDOWN NOSAVE, no
// persistence) while the leader cannot hear of it (its connection is cut at
// the same moment), so the leader believes its term valid until its local
// deadline. The amnesia guard keeps the lease from the other node until
// MaxLease has passed since the restart: never two valid terms, and the
// next token is greater than every token before the restart. Without the
// guard the other node would win at once, while the leader's term is valid.
func TestAmnesiaRestartWithoutData(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	p := newProxy(t, srv.Addr)
	isolated := newBackend(t, p.client(t), admin, WithMaxLease(testConfig.LeaseDuration))
	cl := newCluster(t)
	a := cl.Start("a", isolated, "lease")
	ta := a.WaitElected(5 * time.Second)
	b := cl.Start("b", sameNamespace(t, isolated, newClient(t, srv.Addr)), "lease")
	b.NotElected(testConfig.RenewInterval)
	runBefore := runID(t, admin)

	p.cut()
	deadline := time.Now().Add(ta.Term.Remaining())
	restartAt := time.Now()
	srv.restart()
	if runID(t, admin) == runBefore {
		t.Fatal("run id unchanged after the restart")
	}
	t.Logf("Redis restarted in %v; a's term has %v left", time.Since(restartAt), time.Until(deadline))

	tb := b.WaitElected(isolated.MaxLease() + 2*time.Second)
	if ta.Term.Valid() {
		t.Errorf("a's term %v still valid when b was elected with %v: two valid terms (§15)", ta.Term, tb.Term)
	}
	ta.WaitEnded(t, time.Until(deadline)+time.Second)
	t.Logf("b elected %v after the restart, %v after a's term ended", tb.ElectedAt.Sub(restartAt), tb.ElectedAt.Sub(ta.EndedAt))
	if !ta.EndedAt.Before(tb.ElectedAt) {
		t.Errorf("a's term ended at %v, after b was elected at %v: two valid terms (§15)", ta.EndedAt, tb.ElectedAt)
	}
	if !tb.ElectedAt.After(deadline) {
		t.Errorf("b elected before a's local deadline: two valid terms (§15)")
	}
	if since := tb.ElectedAt.Sub(restartAt); since < isolated.MaxLease() {
		t.Errorf("b elected %v after the restart; want no grant before MaxLease %v (§15)", since, isolated.MaxLease())
	}
	if tb.Term.Token() <= ta.Term.Token() {
		t.Errorf("b's token %d after the restart; want > a's %d from before it (F5, §15)", tb.Term.Token(), ta.Term.Token())
	}
	p.heal()
}

// §15: a restart that reloads an older snapshot brings back sessions and
// leases that no longer match what clients believe, and the token counter
// of the snapshot. The meta hash in the snapshot looks healthy; the run id
// recorded in it is the old process's, and that is what gives the reload
// away. Every restored session is ended, no lease is granted for MaxLease,
// and tokens stay above every token issued before the restart, including
// those issued after the snapshot.
func TestAmnesiaOlderSnapshot(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	const maxLease = 1500 * time.Millisecond
	b := newBackend(t, newClient(t, srv.Addr), admin, WithMaxLease(maxLease))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sa, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: maxLease})
	if err != nil {
		t.Fatal(err)
	}
	gx, err := sa.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.PutValue(ctx, "x", gx.Token, []byte("in the snapshot")); err != nil {
		t.Fatal(err)
	}
	if err := admin.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	// Writes after the snapshot, lost in the restart.
	if _, err := sa.Release(ctx, "x", gx.Token); err != nil {
		t.Fatal(err)
	}
	sb, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: maxLease})
	if err != nil {
		t.Fatal(err)
	}
	var last, xToken backends.Token
	for _, name := range []string{"x", "y", "z"} {
		g, err := sb.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "x" {
			xToken = g.Token
		}
		last = max(last, g.Token)
	}
	if err := sb.PutValue(ctx, "x", xToken, []byte("lost")); err != nil {
		t.Fatal(err)
	}

	restartAt := time.Now()
	srv.restart() // SHUTDOWN NOSAVE; the new process loads the older dump.rdb
	if n, err := admin.HExists(ctx, b.keys.meta(), field(fieldExpiry, string(sa.ID()))).Result(); err != nil || !n {
		t.Fatalf("session a after the reload: on record = %v, %v; want the snapshot loaded", n, err)
	}

	// The first call sees the reload and ends every restored session.
	if _, err := sa.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive of a session restored from the snapshot = %v; want ErrSessionExpired", err)
	}
	if _, err := sb.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive of a session lost in the restart = %v; want ErrSessionExpired", err)
	}
	sc, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: maxLease})
	if err != nil {
		t.Fatalf("OpenSession during the guard: %v", err)
	}
	defer sc.Close(ctx)
	var g backends.Grant
	for {
		g, err = sc.Acquire(ctx, "x")
		if err == nil {
			break
		}
		if !errors.Is(err, backends.ErrLeaseHeld) {
			t.Fatalf("Acquire during the guard = %v; want ErrLeaseHeld", err)
		}
		if _, err := sc.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if since := time.Since(restartAt); since < maxLease {
		t.Errorf("Acquire succeeded %v after the restart; want no grant before MaxLease %v (§15)", since, maxLease)
	}
	if g.Token <= last {
		t.Errorf("token after the reload %d; want > %d, the last before the restart (F5, §15)", g.Token, last)
	}
	if string(g.Value) != "in the snapshot" {
		t.Errorf("value after the reload %q; want %q, the snapshot's (values written later are lost)", g.Value, "in the snapshot")
	}
}

// §15: what is not a loss of state does not start the guard. SCRIPT FLUSH
// empties the script cache: the next calls get NOSCRIPT and load the scripts
// again, in the same process, with the same run id, and nothing changes.
func TestScriptFlushIsNotAmnesia(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	b := newBackend(t, newClient(t, srv.Addr), admin, WithMaxLease(time.Second))
	ctx := context.Background()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	g, err := s.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeepAlive(ctx); err != nil {
		t.Fatalf("KeepAlive after SCRIPT FLUSH: %v; want the session alive", err)
	}
	if _, err := s.Release(ctx, "lease", g.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "lease"); err != nil {
		t.Errorf("Acquire after SCRIPT FLUSH: %v; want no guard", err)
	}
}
