package simbapg

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// contenders returns n nodes of one schema, spread over a few backends (each
// with its pool and LISTEN connection, as separate processes would have, so
// that the shared server's connections suffice) and the faultnet links the
// backends dial through.
func contenders(t *testing.T, n, backends int, cl *enginetest.Cluster) ([]*Backend, []*faultnet.Link, []*enginetest.Node) {
	t.Helper()
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	var bs []*Backend
	var links []*faultnet.Link
	for len(bs) < backends {
		link := faultnet.New()
		pool := newPool(t, dsn, link)
		if len(bs) == 0 {
			bs = append(bs, newBackend(t, pool, admin))
		} else {
			bs = append(bs, sameSchema(t, bs[0], pool))
		}
		links = append(links, link)
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
func cutFor(link *faultnet.Link, d time.Duration) {
	link.Cut()
	time.AfterFunc(d, link.Heal)
}

// T2, F5, §11: 20 nodes contend for one name on the real server for a few
// seconds, while the leader keeps handing over — stopping gracefully, or
// cut off from the server (its term ends at its local deadline, and another
// node takes over once the server expired its session) — and at no instant
// are two of its terms valid, and its tokens strictly increase (the cluster's
// record shows both).
func TestContentionOneName(t *testing.T) {
	cl := newCluster(t)
	_, links, nodes := contenders(t, 20, 4, cl)
	for _, n := range nodes {
		n.Start("one")
	}
	end := time.Now().Add(6 * time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	handoffs, cuts := 0, 0
	for time.Now().Before(end) {
		leader := -1
		waitFor(t, 3*testConfig.LeaseDuration, "a leader of one", func() bool {
			for i, n := range nodes {
				if len(n.Leading()) == 1 {
					leader = i
					return true
				}
			}
			return false
		})
		if rng.IntN(5) == 0 {
			cutFor(links[leader%len(links)], testConfig.LeaseDuration)
			cuts++
			// Wait for the next leader, behind another link.
			waitFor(t, 3*testConfig.LeaseDuration, "a leader after the cut", func() bool {
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

// T2, F5: 200 leases over 10 nodes, three contending for each, on the real
// server, while nodes stop some of their elections, close and
// are replaced (handing their leases over gracefully), or are cut off from
// the server for a lease duration (the others take over once the server
// expired their sessions): never two valid terms of a name, tokens
// strictly increase per name, and every lease is held again at the end.
func TestContentionManyLeases(t *testing.T) {
	const leases = 200
	cl := newCluster(t)
	bs, links, nodes := contenders(t, 10, 5, cl)
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
			cutFor(links[i%len(links)], testConfig.LeaseDuration)
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
	if !waitUntil(4*testConfig.LeaseDuration+5*time.Second, func() bool { return held() == leases }) {
		t.Errorf("%d of %d leases held at the end", held(), leases)
		for _, n := range nodes {
			s := n.C.Snapshot()
			t.Logf("node %s: %v, %d leading, last error %v", n.Name, s.State, len(n.Leading()), s.LastError)
		}
	}
	t.Logf("%d terms of %d leases", cl.Terms(), leases)
}

// waitUntil polls cond every few milliseconds until it holds (true) or d
// passed (false).
func waitUntil(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
