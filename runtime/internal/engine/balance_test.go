package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/fairtest"
)

func ids(n int) []backends.SessionID {
	out := make([]backends.SessionID, n)
	for i := range out {
		out[i] = backends.SessionID(fmt.Sprintf("m%02d", i))
	}
	return out
}

// fair reports whether every member holds ⌊n/m⌋ or ⌈n/m⌉ partitions and no
// partition is unassigned.
func fair(n int, members, plan []backends.SessionID) error {
	count := map[backends.SessionID]int{}
	for p, h := range plan {
		if h == "" {
			return fmt.Errorf("partition %d unassigned", p)
		}
		count[h]++
	}
	lo, hi := n/len(members), (n+len(members)-1)/len(members)
	for _, m := range members {
		if c := count[m]; c < lo || c > hi {
			return fmt.Errorf("member %s holds %d, want %d..%d", m, c, lo, hi)
		}
	}
	return nil
}

// §13: from any state, assign reaches a fair state with the minimum number
// of moves; a fair state needs none (sticky); the plan does not depend on
// the order members are listed in.
func TestAssignFairAndMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 20000 {
		n := 1 + rng.IntN(40)
		m := 1 + rng.IntN(9)
		all := ids(m + 3) // three non-members may hold partitions (departed)
		members := all[:m]
		holders := make([]backends.SessionID, n)
		for p := range holders {
			if k := rng.IntN(len(all) + 2); k < len(all) {
				holders[p] = all[k]
			}
		}
		plan := assign(n, members, holders)
		if err := fair(n, members, plan); err != nil {
			t.Fatalf("iter %d: n=%d holders=%v plan=%v: not fair: %v", iter, n, holders, plan, err)
		}
		if got, want := moves(holders, plan), fairtest.MinMoves(n, members, holders); got != want {
			t.Fatalf("iter %d: n=%d members=%v holders=%v plan=%v: %d moves, want the minimum %d",
				iter, n, members, holders, plan, got, want)
		}
		if again := assign(n, members, plan); moves(plan, again) != 0 {
			t.Fatalf("iter %d: a fair state %v is moved again to %v", iter, plan, again)
		}
		shuffled := append([]backends.SessionID(nil), members...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if other := assign(n, shuffled, holders); moves(plan, other) != 0 {
			t.Fatalf("iter %d: member order changed the plan", iter)
		}
	}
}

// §13: a member gives up its highest-numbered surplus partitions.
func TestAssignReleasesHighestSurplus(t *testing.T) {
	a, b := backends.SessionID("a"), backends.SessionID("b")
	holders := make([]backends.SessionID, 8)
	for i := range holders {
		holders[i] = a
	}
	plan := assign(8, []backends.SessionID{a, b}, holders)
	for i, h := range plan {
		want := a
		if i >= 4 {
			want = b
		}
		if h != want {
			t.Fatalf("plan = %v, want a keeping 0-3 and b taking 4-7", plan)
		}
	}
}
