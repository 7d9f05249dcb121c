package backendtest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// ContentionHarness describes a store for [RunContention].
type ContentionHarness struct {
	// Lease is the nodes' lease duration (their configuration is
	// runtime.ConfigFor(Lease)); 1–3 s suits a real server.
	Lease time.Duration
	// Backends returns n backends of one new namespace, each with
	// connections of its own (as n processes would have) through a Path the
	// scenarios cut; only Cut and Heal are used.
	Backends func(t *testing.T, n int) ([]backends.Backend, []Path)
}

// RunContention runs two contention scenarios on a real store, for a few
// seconds each: many nodes contending for one name while its leader keeps
// handing over (stopping, or cut off), and 200 leases over 10 nodes while
// nodes stop elections, close and are replaced, or are cut off. Both check
// through the cluster's record that no two terms of a name were valid at
// once and that tokens strictly increased per name (T2, F5), and the second
// that every lease is held again at the end.
func RunContention(t *testing.T, h ContentionHarness) {
	if h.Backends == nil || h.Lease <= 0 {
		t.Fatalf("ContentionHarness needs Backends and a positive Lease (got Lease %v)", h.Lease)
	}
	t.Run("OneName", func(t *testing.T) { contentionOneName(t, h) })
	t.Run("ManyLeases", func(t *testing.T) { contentionManyLeases(t, h) })
}

// contenders returns n nodes of one namespace spread over nb backends, and
// the paths the backends dial through.
func (h ContentionHarness) contenders(t *testing.T, n, nb int, cl *enginetest.Cluster) ([]backends.Backend, []Path, []*enginetest.Node) {
	t.Helper()
	bs, links := h.Backends(t, nb)
	if len(bs) != nb || len(links) != nb {
		t.Fatalf("ContentionHarness.Backends(%d) returned %d backends and %d paths; want %d of each", nb, len(bs), len(links), nb)
	}
	nodes := make([]*enginetest.Node, n)
	for i := range nodes {
		nodes[i] = cl.NewNode(fmt.Sprintf("n%d", i), bs[i%len(bs)])
	}
	return bs, links, nodes
}

// cutFor cuts link for d, on a goroutine of its own: the nodes behind it
// lose their sessions (their terms end at their local deadlines) and open
// new ones once it heals.
func cutFor(link Path, d time.Duration) {
	link.Cut()
	time.AfterFunc(d, link.Heal)
}

// contentionOneName: T2, F5, §11: 20 nodes contend for one name on the real server for a few
// seconds, while the leader keeps handing over — stopping gracefully, or
// cut off from the server (its term ends at its local deadline, and another
// node takes over once the server expired its session) — and at no instant
// are two of its terms valid, and its tokens strictly increase (the cluster's
// record shows both).
func contentionOneName(t *testing.T, h ContentionHarness) {
	cfg := runtime.ConfigFor(h.Lease)
	cl := enginetest.NewCluster(t, cfg)
	_, links, nodes := h.contenders(t, 20, 4, cl)
	for _, n := range nodes {
		n.Start("one")
	}
	end := time.Now().Add(6 * time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	handoffs, cuts := 0, 0
	for time.Now().Before(end) {
		leader := -1
		waitFor(t, 3*cfg.LeaseDuration, "a leader of one", func() bool {
			for i, n := range nodes {
				if len(n.Leading()) == 1 {
					leader = i
					return true
				}
			}
			return false
		})
		if rng.IntN(5) == 0 {
			cutFor(links[leader%len(links)], cfg.LeaseDuration)
			cuts++
			// Wait for the next leader, behind another link.
			waitFor(t, 3*cfg.LeaseDuration, "a leader after the cut", func() bool {
				for i, n := range nodes {
					if i%len(links) != leader%len(links) && len(n.Leading()) == 1 {
						return true
					}
				}
				return false
			})
		} else {
			nodes[leader].Stop("one")
			nodes[leader].Start("one")
		}
		handoffs++
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
	}
	t.Logf("%d hand-offs (%d by cutting the leader off), %d terms", handoffs, cuts, cl.Terms())
	if cl.Terms() < 5 {
		t.Errorf("%d terms in 6s; want many hand-offs", cl.Terms())
	}
}

// contentionManyLeases: T2, F5: 200 leases over 10 nodes, three contending for each, on the real
// server, while nodes stop some of their elections, close and
// are replaced (handing their leases over gracefully), or are cut off from
// the server for a lease duration (the others take over once the server
// expired their sessions): never two valid terms of a name, tokens
// strictly increase per name, and every lease is held again at the end.
func contentionManyLeases(t *testing.T, h ContentionHarness) {
	const leases = 200
	cfg := runtime.ConfigFor(h.Lease)
	cl := enginetest.NewCluster(t, cfg)
	bs, links, nodes := h.contenders(t, 10, 5, cl)
	names := make([]string, leases)
	for i := range names {
		names[i] = fmt.Sprintf("lease-%03d", i)
	}
	// Each lease has three contenders, each node 60 leases: all ten
	// contending for every lease overloads a 2-core machine's pools under
	// -race (keep-alives queue behind acquisitions and time out).
	mine := func(i int) []string {
		var l []string
		for j, name := range names {
			if d := (j - i + len(nodes)) % len(nodes); d < 3 {
				l = append(l, name)
			}
		}
		return l
	}
	for i, n := range nodes {
		for _, name := range mine(i) {
			n.Start(name)
		}
	}
	held := func() int {
		seen := map[string]bool{}
		for _, n := range nodes {
			for _, name := range n.Leading() {
				seen[name] = true
			}
		}
		return len(seen)
	}
	waitFor(t, 20*time.Second, "every lease held", func() bool { return held() == leases })
	rng := rand.New(rand.NewPCG(3, 4))
	end := time.Now().Add(6 * time.Second)
	for round := 0; time.Now().Before(end); round++ {
		i := rng.IntN(len(nodes))
		n := nodes[i]
		switch round % 3 {
		case 0: // stop and restart a few of its elections
			for _, name := range n.Leading()[:min(5, len(n.Leading()))] {
				n.Stop(name)
				n.Start(name)
			}
		case 1: // its backend is cut off from the server
			cutFor(links[i%len(links)], cfg.LeaseDuration)
		case 2: // it closes, and a new node takes its place
			n.Close()
			nodes[i] = cl.NewNode(n.Name+"'", bs[i%len(bs)])
			for _, name := range mine(i) {
				nodes[i].Start(name)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The faults end: a cut still in force would also fail the nodes'
	// closing, which releases what they hold.
	for _, l := range links {
		l.Heal()
	}
	if !pollUntil(4*cfg.LeaseDuration+5*time.Second, func() bool { return held() == leases }) {
		t.Errorf("%d of %d leases held at the end", held(), leases)
		for _, n := range nodes {
			s := n.C.Snapshot()
			t.Logf("node %s: %v, %d leading, last error %v", n.Name, s.State, len(n.Leading()), s.LastError)
		}
	}
	t.Logf("%d terms of %d leases", cl.Terms(), leases)
}

// waitFor polls cond every few milliseconds until it holds, and fails the
// test if it does not within d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !pollUntil(d, cond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}

// pollUntil polls cond every few milliseconds until it holds (true) or d
// passed (false).
func pollUntil(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
