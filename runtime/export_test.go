package runtime

import (
	"slices"

	"github.com/simba-go/simba/backends"
)

// WithSeed fixes the seed of the candidates' retry jitter, for reproducible
// tests. Clients otherwise take a random seed.
func WithSeed(seed uint64) Option { return func(o *options) { o.seed, o.seeded = seed, true } }

// PauseEngine stops the client's timer. While no backend reply, task or
// callback completion and no release notification arrives (freeze the
// node's link first and wait for the bubble), no goroutine of the engine
// runs, however much virtual time passes: the node is paused (T3).
// ResumeEngine ends the pause with a tick at the current time.
func (c *Client) PauseEngine() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer.Stop()
}

// ResumeEngine ticks the engine, which re-arms its timer.
func (c *Client) ResumeEngine() { c.apply(c.m.Tick) }

// MinMoves exposes the tests' independent oracle for the fewest moves to a
// fair assignment to the external test package.
var MinMoves = minMoves

// minMoves is the fewest partitions that must change hands to make holders
// fair over members, computed independently of assign: each member sheds its
// surplus over its quota (the larger quotas best go to the larger holders),
// and partitions held by nobody in the group must move anyway.
func minMoves(n int, members, holders []backends.SessionID) int {
	count := map[backends.SessionID]int{}
	in := map[backends.SessionID]bool{}
	for _, m := range members {
		in[m] = true
	}
	orphans := 0
	for _, h := range holders {
		if in[h] {
			count[h]++
		} else {
			orphans++
		}
	}
	counts := make([]int, 0, len(members))
	for _, m := range members {
		counts = append(counts, count[m])
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	surplus := 0
	for rank, c := range counts {
		quota := n / len(members)
		if rank < n%len(members) {
			quota++
		}
		surplus += max(0, c-quota)
	}
	return surplus + orphans
}
