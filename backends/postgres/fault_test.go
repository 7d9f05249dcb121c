package simbapg

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// §11, §15, T2: a private PostgreSQL that three nodes contend on is
// restarted twice: with its data (pg_ctl restart -m fast), and with its data
// lost (wiped, initdb, started: the schema is created again, and its guard
// holds grants back for MaxLease). At no instant are two terms valid, tokens
// strictly increase, and after each restart a node leads again.
func TestServerRestart(t *testing.T) {
	srv := testservers.StartPostgres(t)
	cl := newCluster(t)
	pool := newPool(t, srv.DSN(), nil)
	b := newBackend(t, pool, pool)
	var nodes []*enginetest.Node
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, cl.Start(name, sameSchema(t, b, newPool(t, srv.DSN(), nil)), "lease"))
	}
	leader := func(within time.Duration) {
		t.Helper()
		waitFor(t, within, "a leader", func() bool {
			for _, n := range nodes {
				if len(n.Leading()) == 1 {
					return true
				}
			}
			return false
		})
	}
	leader(5 * time.Second)
	before := cl.Terms()

	srv.Restart()
	leader(2*testConfig.LeaseDuration + 2*time.Second)
	t.Logf("after the restart with data: %d new terms", cl.Terms()-before)

	// Without data: the old leader's term stays valid until its local
	// deadline (nobody can tell it), and the new schema's guard grants
	// nothing for MaxLease meanwhile; then a node is elected.
	before = cl.Terms()
	start := time.Now()
	srv.Wipe()
	waitFor(t, b.MaxLease()+2*testConfig.LeaseDuration+5*time.Second, "a term after the restart without data", func() bool {
		return cl.Terms() > before
	})
	t.Logf("after the restart without data: a new term %v later", time.Since(start))
	if took := time.Since(start); took < b.MaxLease() {
		t.Errorf("a new term %v after the data was lost; want none before MaxLease %v (§15)", took, b.MaxLease())
	}
}

// A1: the LISTEN connection of the candidate's backend is terminated
// (pg_terminate_backend) while it waits: a hand-off meanwhile still
// happens (at the candidate's next attempt, or woken by the reconnection),
// and once the connection is back, hand-offs are prompt again.
func TestListenerTerminatedHandOff(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	cl := newCluster(t)
	b1 := newBackend(t, newPool(t, dsn, nil), admin)
	b2 := sameSchema(t, b1, newPool(t, dsn, nil))
	a := cl.Start("a", b1, "lease")
	a.WaitElected(5 * time.Second)
	c := cl.Start("c", b2, "lease")
	c.NotElected(testConfig.RenewInterval)
	waitListening(t, b2)
	ctx := testCtx(t)

	old := b2.listenerPID.Load()
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(old)); err != nil {
		t.Fatal(err)
	}
	a.Stop("lease")
	c.WaitElected(testConfig.LeaseDuration) // by an attempt or by the reconnection's wake-up
	waitFor(t, 10*time.Second, "a new LISTEN connection", func() bool { p := b2.listenerPID.Load(); return p != 0 && p != old })

	// Hand-offs are prompt again: c hands back to a, a to c.
	a.Start("lease")
	a.NotElected(testConfig.RenewInterval)
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	c.Stop("lease")
	a.WaitElected(5 * time.Second)
	back := time.Since(start)
	c.Start("lease")
	c.NotElected(testConfig.RenewInterval)
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	a.Stop("lease")
	c.WaitElected(5 * time.Second)
	again := time.Since(start)
	t.Logf("hand-offs after the reconnection: %v and %v", back, again)
	// Candidates' attempts come every RenewInterval/2 + jitter (≥ 333 ms):
	// only notifications explain a faster hand-off.
	if again > 300*time.Millisecond {
		t.Errorf("a hand-off to the node whose LISTEN connection was terminated took %v; want it prompt, by notification, once reconnected", again)
	}
}
