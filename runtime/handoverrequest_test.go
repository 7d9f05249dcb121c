package runtime_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// requester holds the request lease of name for a hand-over to the client
// of identity to, as `simba handover` does, until the returned function
// releases it.
func requester(t *testing.T, c *runtime.Client, name string) func() {
	t.Helper()
	term, err := c.Lock(context.Background(), runtime.HandOverRequestName(name))
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := c.Unlock(context.Background(), term); err != nil {
			t.Error(err)
		}
	}
}

// A leader that accepts hand-over requests hands over to the successor a
// request names — at once when it leads as the request comes, and within
// a renewal interval of its election when the request came first. A
// request for a node that does not contend changes nothing.
func TestHandOverOnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		var log electedLog
		for _, n := range []string{"node-a", "node-b", "node-c"} {
			c := newClient(t, b, runtime.WithIdentity(n))
			defer closeClient(t, c)
			if _, err := c.StartElection("lead", log.listener(n), runtime.AcceptHandOver(), runtime.AcceptHandOverRequests()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if got := log.since(0); len(got) != 1 {
			t.Fatalf("elected %v; want one leader", got)
		}
		leader := log.since(0)[0]
		to := "node-b"
		if leader == to {
			to = "node-c"
		}

		// A request for a node that does not contend: nothing moves.
		nobody := newClient(t, b, runtime.WithIdentity(runtime.HandOverRequestIdentity("node-z")))
		defer closeClient(t, nobody)
		release := requester(t, nobody, "lead")
		time.Sleep(3 * cfg.RenewInterval)
		synctest.Wait()
		if got := log.since(1); len(got) != 0 {
			t.Fatalf("a request for node-z, which does not contend, elected %v; want no change", got)
		}
		release()

		// A request for a contending node: it leads next, at once.
		asker := newClient(t, b, runtime.WithIdentity(runtime.HandOverRequestIdentity(to)))
		defer closeClient(t, asker)
		start := time.Now()
		release = requester(t, asker, "lead")
		synctest.Wait()
		if got := log.since(1); len(got) != 1 || got[0] != to {
			t.Fatalf("a request for %s elected %v (leader was %s); want %s alone", to, got, leader, to)
		}
		if took := time.Since(start); took > 0 {
			t.Errorf("the hand-over on request took %v of virtual time; want it at once", took)
		}
		// The request still stands: the new leader, its subject, keeps the lease.
		time.Sleep(3 * cfg.RenewInterval)
		synctest.Wait()
		if got := log.since(2); len(got) != 0 {
			t.Errorf("while the request for the leader stood, elected %v; want no change", got)
		}
		release()
	})
}

// Hand-over requests are off by default: a leader that did not opt in
// stays, whatever a request asks.
func TestHandOverRequestsOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		var log electedLog
		for _, n := range []string{"node-a", "node-b"} {
			c := newClient(t, b, runtime.WithIdentity(n))
			defer closeClient(t, c)
			if _, err := c.StartElection("lead", log.listener(n), runtime.AcceptHandOver()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		to := "node-b"
		if log.since(0)[0] == to {
			to = "node-a"
		}
		asker := newClient(t, b, runtime.WithIdentity(runtime.HandOverRequestIdentity(to)))
		defer closeClient(t, asker)
		release := requester(t, asker, "lead")
		time.Sleep(3 * cfg.RenewInterval)
		synctest.Wait()
		if got := log.since(1); len(got) != 0 {
			t.Errorf("a leader that does not accept requests moved: elected %v", got)
		}
		release()
	})
}

// A request that stands before the node that accepts it is elected is
// carried out once it leads: within a renewal interval of its election.
func TestHandOverRequestBeforeElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		var log electedLog
		asker := newClient(t, b, runtime.WithIdentity(runtime.HandOverRequestIdentity("node-b")))
		defer closeClient(t, asker)
		release := requester(t, asker, "lead")
		defer release()
		ca := newClient(t, b, runtime.WithIdentity("node-a"))
		defer closeClient(t, ca)
		ea, err := ca.StartElection("lead", log.listener("node-a"), runtime.AcceptHandOverRequests())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if ea.Term() == nil {
			t.Fatal("node-a does not lead")
		}
		cb := newClient(t, b, runtime.WithIdentity("node-b"))
		defer closeClient(t, cb)
		if _, err := cb.StartElection("lead", log.listener("node-b"), runtime.AcceptHandOver()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cfg.RenewInterval + time.Millisecond)
		synctest.Wait()
		if got := log.since(0); len(got) != 2 || got[1] != "node-b" {
			t.Fatalf("elected %v; want node-a, then node-b on the standing request", got)
		}
		if err := ea.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
