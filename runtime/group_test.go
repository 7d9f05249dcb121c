package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// partLog records every partition term a group's tasks saw, and checks at
// each start that no other member holds a valid term for that partition.
type partLog struct {
	mu         sync.Mutex
	terms      []*partTerm
	violations []string
}

type partTerm struct {
	member     int
	partition  int
	term       *runtime.Term
	start, end time.Time
}

func (l *partLog) task(member int) runtime.PartitionFunc {
	return func(ctx context.Context, t *runtime.Term, partition int) error {
		now := time.Now()
		l.mu.Lock()
		for _, r := range l.terms {
			if r.partition == partition && r.term.Valid() {
				l.violations = append(l.violations, fmt.Sprintf("at %v member %d got partition %d (%v) while member %d's %v is valid",
					now, member, partition, t, r.member, r.term))
			}
		}
		rec := &partTerm{member: member, partition: partition, term: t, start: now}
		l.terms = append(l.terms, rec)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		rec.end = time.Now()
		l.mu.Unlock()
		return nil
	}
}

// check: per partition, terms never overlap and tokens strictly increase.
func (l *partLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
	byPart := map[int][]*partTerm{}
	for _, r := range l.terms {
		byPart[r.partition] = append(byPart[r.partition], r)
	}
	for p, rs := range byPart {
		slices.SortStableFunc(rs, func(a, b *partTerm) int { return a.start.Compare(b.start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				t.Errorf("partition %d: member %d's term [%v, %v) overlaps member %d's from %v",
					p, rs[i-1].member, rs[i-1].start, rs[i-1].end, rs[i].member, rs[i].start)
			}
			if rs[i].term.Token() <= rs[i-1].term.Token() {
				t.Errorf("partition %d: token %d after %d", p, rs[i].term.Token(), rs[i-1].term.Token())
			}
		}
	}
}

type member struct {
	id     int
	link   *link
	client *runtime.Client
	group  *runtime.Group
	events *events
}

type groupRig struct {
	t       *testing.T
	store   *memory.Store
	n       int
	log     partLog
	members map[int]*member // the current members
	all     []*member       // every member ever, to close at the end
	nextID  int
}

func (r *groupRig) join() *member {
	r.t.Helper()
	m := &member{id: r.nextID, link: newLink(r.store), events: &events{}}
	r.nextID++
	m.client = newClient(r.t, m.link, runtime.WithObserver(m.events))
	g, err := m.client.StartGroup("billing", r.n, runtime.Schedule{}, r.log.task(m.id))
	if err != nil {
		r.t.Fatal(err)
	}
	m.group = g
	r.members[m.id] = m
	r.all = append(r.all, m)
	return m
}

// holders returns who holds each partition, as "m<id>", "" if nobody.
func (r *groupRig) holders() []string {
	out := make([]string, r.n)
	for _, m := range r.members {
		for _, p := range m.group.Partitions() {
			if out[p] != "" {
				r.t.Errorf("partition %d held by %s and m%d", p, out[p], m.id)
			}
			out[p] = fmt.Sprint("m", m.id)
		}
	}
	return out
}

func (r *groupRig) ids() []string {
	var ids []string
	for id := range r.members {
		ids = append(ids, fmt.Sprint("m", id))
	}
	return ids
}

// fair reports whether every partition is held and every member holds
// ⌊n/m⌋ or ⌈n/m⌉ partitions.
func (r *groupRig) fair() bool {
	count := map[string]int{}
	for _, h := range r.holders() {
		if h == "" {
			return false
		}
		count[h]++
	}
	lo, hi := r.n/len(r.members), (r.n+len(r.members)-1)/len(r.members)
	for _, id := range r.ids() {
		if count[id] < lo || count[id] > hi {
			return false
		}
	}
	return true
}

func (r *groupRig) gains() int {
	n := 0
	for _, m := range r.members {
		n += len(m.events.of(runtime.EventPartitionGained))
	}
	return n
}

func sessionIDs(ss []string) []backends.SessionID {
	out := make([]backends.SessionID, len(ss))
	for i, s := range ss {
		out[i] = backends.SessionID(s)
	}
	return out
}

// change applies a membership change and checks SPEC §13: the assignment
// converges to fair shares within bound, and exactly the minimum number of
// partitions moved (computed from the state before the change).
func (r *groupRig) change(what string, bound time.Duration, apply func(), gone ...int) {
	r.t.Helper()
	before := r.holders()
	gains := r.gains()
	apply()
	for _, id := range gone {
		gains -= len(r.members[id].events.of(runtime.EventPartitionGained))
		delete(r.members, id)
	}
	want := runtime.MinMoves(r.n, sessionIDs(r.ids()), sessionIDs(before))
	start := time.Now()
	for synctest.Wait(); !r.fair(); synctest.Wait() {
		if time.Since(start) > bound {
			r.t.Fatalf("%s: not fair %v after the change: %v", what, bound, r.holders())
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(3 * cfg.RenewInterval) // anything still moving would show now
	if got := r.gains() - gains; got != want {
		r.t.Errorf("%s: %d partitions moved, want the minimum %d (from %v to %v)", what, got, want, before, r.holders())
	}
	r.t.Logf("%s: fair after %v, %d moves", what, took, want)
}

// §13: 1 → 3 → 5 → 2 → 1 members of a 16-partition group. After each change
// the assignment converges to fair shares within a bounded time, moving
// exactly the minimum number of partitions; no two members ever hold a valid
// term for one partition; tokens strictly increase per partition. A member
// that leaves gracefully hands over at once; a member that crashes loses its
// partitions after the lease duration.
//
// The bounds: a join converges within two renewal intervals (the others see
// the new member at their next keep-alive, hand over, and the newcomer is
// woken by the release notification); a graceful leave at once (the leaver
// leaves, then releases, and the releases wake the others); a crash within
// LeaseDuration plus two renewal intervals (the store expires the session,
// the next keep-alive of any member notices, the others re-read and take
// over). Tasks here exit as soon as they are cancelled.
func TestGroupRebalancing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &groupRig{t: t, store: memory.New(memory.WithMaxLease(cfg.LeaseDuration)), n: 16, members: map[int]*member{}}
		joinBound := 2 * cfg.RenewInterval
		r.change("first member", joinBound, func() { r.join() })
		r.change("1 → 3", joinBound, func() { r.join(); r.join() })
		r.change("3 → 5", joinBound, func() { r.join(); r.join() })

		// Steady state: one keep-alive per member per interval, no polling.
		r.store.Faults().ResetCalls()
		time.Sleep(5 * cfg.RenewInterval)
		calls := r.store.Faults().Calls()
		if calls.KeepAlive > 5*5+5 || calls.Acquire != 0 || calls.Members != 0 || calls.Total() != calls.KeepAlive {
			t.Errorf("steady state over 5 intervals with 5 members: %+v; want only ~25 keep-alives", calls)
		}

		// 5 → 2, one graceful leave at a time, each a change of its own.
		for _, id := range []int{0, 1, 2} {
			leaver := r.members[id]
			r.change(fmt.Sprintf("%d → %d (graceful)", len(r.members), len(r.members)-1), 0, func() {
				if err := leaver.group.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			}, id)
		}
		crashed := r.members[3]
		r.change("2 → 1 (crash)", cfg.LeaseDuration+2*cfg.RenewInterval, func() { crashed.link.Cut() }, 3)
		crashed.link.Heal()
		for _, m := range r.all {
			closeClient(t, m.client)
		}
		r.log.check(t)
	})
}
