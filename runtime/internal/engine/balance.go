package engine

import (
	"cmp"
	"slices"

	"github.com/simba-go/simba/backends"
)

// assign computes the fair assignment of a group's n partitions to its
// members that moves the fewest partitions from the current holders (§13).
// Every member computes it from the same view and so agrees on it.
//
// A state is fair when every member holds ⌊n/m⌋ or ⌈n/m⌉ partitions. The
// n mod m members allowed ⌈n/m⌉ are those already holding that many or more
// (in id order), so a fair state needs no moves. Every member keeps its
// lowest-numbered partitions up to its quota and gives up the rest (its
// highest-numbered surplus); partitions that are free, held by non-members or
// given up go, in ascending order, to the members below their quota, taken in
// id order. Only partitions a member must give up or that nobody (in the
// group) holds change hands, which is the minimum.
//
// holders[i] is the session holding partition i, "" if free; the result has
// the same shape. members need not be sorted.
func assign(n int, members, holders []backends.SessionID) []backends.SessionID {
	plan := make([]backends.SessionID, n)
	if len(members) == 0 || n == 0 {
		return plan
	}
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	index := make(map[backends.SessionID]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	held := make([][]int, len(ids)) // partitions each member holds, ascending
	for p, h := range holders[:min(n, len(holders))] {
		if i, ok := index[h]; ok {
			held[i] = append(held[i], p)
		}
	}

	// Quotas: n mod m members get one more than ⌊n/m⌋: first those that
	// hold at least ⌈n/m⌉ already, then the others, each in id order.
	// Giving the larger quota to any member at or above ⌈n/m⌉ saves one
	// move, to any other saves none, so every such choice is minimal; this
	// one also stays the same while a rebalance is under way (members above
	// ⌈n/m⌉ shrinking, members below growing), so that no partition moves
	// twice.
	base, extra := n/len(ids), n%len(ids)
	atCeil := func(i int) int {
		if len(held[i]) > base {
			return 0
		}
		return 1
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(atCeil(a), atCeil(b)) })
	quota := make([]int, len(ids))
	for rank, i := range order {
		quota[i] = base
		if rank < extra {
			quota[i]++
		}
	}

	// Keep the lowest-numbered partitions up to the quota.
	count := make([]int, len(ids))
	for i, ps := range held {
		for _, p := range ps[:min(len(ps), quota[i])] {
			plan[p] = ids[i]
			count[i]++
		}
	}
	// Hand out the rest, ascending, to members below quota, in id order.
	next := 0
	for p := range plan {
		if plan[p] != "" {
			continue
		}
		for next < len(ids) && count[next] >= quota[next] {
			next++
		}
		plan[p] = ids[next]
		count[next]++
	}
	return plan
}

// moves counts the partitions whose holder differs between two assignments.
func moves(from, to []backends.SessionID) int {
	n := 0
	for i := range to {
		if i >= len(from) || from[i] != to[i] {
			n++
		}
	}
	return n
}
