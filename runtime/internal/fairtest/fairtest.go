// Package fairtest holds the tests' independent oracle for partition groups:
// the fewest partitions that must change hands to make a group fair, computed
// without the engine's planner, so that tests of the planner (in the engine)
// and of groups end to end (in runtime) check against the same arithmetic.
package fairtest

import (
	"slices"

	"github.com/simba-go/simba/backends"
)

// MinMoves is the fewest of n partitions that must change hands to make
// holders fair over members (each ⌊n/m⌋ or ⌈n/m⌉): each member sheds its
// surplus over its quota (the larger quotas best go to the larger holders),
// and partitions held by nobody in the group must move anyway.
func MinMoves(n int, members, holders []backends.SessionID) int {
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
