package runtime_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime"
)

// partLog records every partition term of a group's members in a
// termcheck.Recorder on the bubble's clock, a partition's lease name for its
// name. A term's adoption and end come from its member's
// EventPartitionGained and EventPartitionLost, delivered at the virtual
// instant they happened; the *Term comes from the partition task, which may
// run later, or not at all if the term ended first. check verifies the
// history with termcheck, as termLog does for elections: never two valid
// terms of a partition at one instant, tokens strictly increasing in the
// order terms began.
type partLog struct {
	group      string
	mu         sync.Mutex
	rec        *termcheck.Recorder // made at the first event, in the bubble
	terms      map[partKey]*partTerm
	violations []string
	reported   map[string]bool
}

type partKey struct {
	member    int
	partition int
	token     runtime.Token
}

type partTerm struct {
	id         termcheck.TermID
	member     int
	partition  int
	token      runtime.Token
	term       *runtime.Term // from the task, nil if it never ran
	start, end time.Time     // from the events
	gained     int           // EventPartitionGained events
	lost       int           // EventPartitionLost events
	tasks      int           // task runs
	reason     runtime.Reason
}

func (l *partLog) violate(key, msg string) {
	if l.reported == nil {
		l.reported = make(map[string]bool)
	}
	if !l.reported[key] {
		l.reported[key] = true
		l.violations = append(l.violations, msg)
	}
}

// record returns the term's record, made when the term is first seen.
// Called with l.mu held.
func (l *partLog) record(member, partition int, token runtime.Token) *partTerm {
	if l.terms == nil {
		l.terms = make(map[partKey]*partTerm)
		l.rec = termcheck.NewRecorder()
	}
	k := partKey{member, partition, token}
	r := l.terms[k]
	if r == nil {
		r = &partTerm{member: member, partition: partition, token: token,
			id: l.rec.Begin(backends.PartitionName(l.group, partition), fmt.Sprintf("member %d", member), int64(token))}
		l.terms[k] = r
	}
	return r
}

// observer returns member's observer, which also passes every event on to
// next. It checks that partition events name the group, the partition's
// lease and a token (§13, observability).
func (l *partLog) observer(member int, next runtime.Observer) runtime.Observer {
	return runtime.ObserverFunc(func(ev runtime.Event) {
		next.Observe(ev)
		if ev.Kind == runtime.EventElected || ev.Kind == runtime.EventRevoked {
			// A partition's term says its group, for metrics per group.
			if ev.Group != l.group || ev.Name != backends.PartitionName(l.group, ev.Partition) {
				l.mu.Lock()
				msg := fmt.Sprintf("member %d: %v event %+v of a partition does not name group %q and the partition", member, ev.Kind, ev, l.group)
				l.violate(msg, msg)
				l.mu.Unlock()
			}
		}
		if ev.Kind != runtime.EventPartitionGained && ev.Kind != runtime.EventPartitionLost {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if ev.Group != l.group || ev.Name != backends.PartitionName(l.group, ev.Partition) || ev.Token <= 0 || ev.Session == "" {
			msg := fmt.Sprintf("member %d: %v event %+v does not name group %q, partition lease, token and session", member, ev.Kind, ev, l.group)
			l.violate(msg, msg)
		}
		r := l.record(member, ev.Partition, ev.Token)
		if ev.Kind == runtime.EventPartitionGained {
			r.gained++
			r.start = time.Now()
		} else {
			r.lost++
			r.end, r.reason = time.Now(), ev.Reason
			l.rec.End(r.id)
		}
	})
}

// task is member's partition function: it records the term and holds the
// partition until the term ends.
func (l *partLog) task(member int) runtime.PartitionFunc {
	return func(ctx context.Context, t *runtime.Term, partition int) error {
		l.mu.Lock()
		if t.Name() != backends.PartitionName(l.group, partition) {
			msg := fmt.Sprintf("member %d: partition %d's task got term %v", member, partition, t)
			l.violate(msg, msg)
		}
		r := l.record(member, partition, t.Token())
		r.term = t
		r.tasks++
		l.mu.Unlock()
		<-ctx.Done()
		return nil
	}
}

// sorted returns the terms by partition, then token.
func (l *partLog) sorted() []*partTerm {
	l.mu.Lock()
	defer l.mu.Unlock()
	terms := slices.Collect(maps.Values(l.terms))
	slices.SortFunc(terms, func(a, b *partTerm) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.token, b.token))
	})
	return terms
}

// check, once every member is closed: the violations seen; termcheck's
// verdict on the terms; every term gained and lost exactly once (one event
// each per move), its task run at most once, with the reason the term
// ended.
func (l *partLog) check(t *testing.T) {
	t.Helper()
	synctest.Wait()
	terms := l.sorted()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
	for _, r := range terms {
		if r.gained != 1 || r.lost != 1 {
			t.Errorf("partition %d token %d (member %d): %d gained and %d lost events, want 1 and 1",
				r.partition, r.token, r.member, r.gained, r.lost)
		}
		if r.tasks > 1 {
			t.Errorf("partition %d token %d: task ran %d times, want once per term", r.partition, r.token, r.tasks)
		}
		if r.term != nil && (r.term.Valid() || r.term.Reason() != r.reason) {
			t.Errorf("partition %d: %v valid=%v reason %v, lost event's reason %v", r.partition, r.term, r.term.Valid(), r.term.Reason(), r.reason)
		}
	}
	if l.rec != nil {
		for _, v := range l.rec.Check(termcheck.Options{}).Violations {
			t.Error(v)
		}
	}
}

// moves returns, for the terms adopted at or after since: how many, how
// many by the given members, and the last instant a partition changed hands
// (a term began or ended) at or after since.
func (l *partLog) moves(since time.Time, by map[int]bool) (gains, byThem int, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last = since
	for _, r := range l.terms {
		if r.gained > 0 && !r.start.Before(since) {
			gains++
			if by[r.member] {
				byThem++
			}
			last = maxTime(last, r.start)
		}
		if r.lost > 0 && !r.end.Before(since) {
			last = maxTime(last, r.end)
		}
	}
	return gains, byThem, last
}

// lost returns how many terms ended at or after since.
func (l *partLog) lostSince(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.terms {
		if r.lost > 0 && !r.end.Before(since) {
			n++
		}
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type member struct {
	id     int
	link   *link
	client *runtime.Client
	group  *runtime.Group
	events *events
}

func (m *member) String() string { return fmt.Sprint("m", m.id) }

type groupRig struct {
	t       *testing.T
	store   *memory.Store
	n       int
	log     *partLog
	members map[int]*member // the current members
	all     []*member       // every member ever, to close at the end
	nextID  int
}

func newGroupRig(t *testing.T, n int) *groupRig {
	return &groupRig{t: t, store: memory.New(memory.WithMaxLease(cfg.LeaseDuration)), n: n,
		log: &partLog{group: "billing"}, members: map[int]*member{}}
}

func (r *groupRig) join() *member {
	r.t.Helper()
	m := &member{id: r.nextID, link: newLink(r.store), events: &events{}}
	r.nextID++
	m.client = newClient(r.t, m.link, runtime.WithObserver(r.log.observer(m.id, m.events)))
	g, err := m.client.StartGroup("billing", r.n, runtime.Schedule{}, r.log.task(m.id))
	if err != nil {
		r.t.Fatal(err)
	}
	m.group = g
	r.members[m.id] = m
	r.all = append(r.all, m)
	return m
}

func (r *groupRig) close() {
	for _, m := range r.all {
		m.link.Heal()
		m.link.Thaw()
		closeClient(r.t, m.client)
	}
	r.log.check(r.t)
}

// holders returns who holds each partition as the store sees it: "m<id>"
// for a current member, "" if free, "!<session>" for anyone else. It also
// checks that what each member reports — Group.Partitions and its Snapshot's
// GroupStatus — matches the store (§13, observability).
func (r *groupRig) holders() []string {
	r.t.Helper()
	view := r.view()
	bySession := map[backends.SessionID]*member{}
	snaps := map[*member]runtime.Snapshot{}
	for _, m := range r.members {
		snap := m.client.Snapshot()
		bySession[snap.Session], snaps[m] = m, snap
	}
	out := make([]string, r.n)
	held := map[*member][]int{}
	for p, h := range view.Holders {
		switch m := bySession[h]; {
		case m != nil:
			out[p] = m.String()
			held[m] = append(held[m], p)
		case h != "":
			out[p] = "!" + string(h)[:6]
		}
	}
	for m, snap := range snaps {
		want := runtime.GroupStatus{Name: "billing", Partitions: r.n, Members: len(view.Members), Held: held[m], Joined: true}
		if len(snap.Groups) != 1 || !groupStatusEqual(snap.Groups[0], want) {
			r.t.Errorf("%v's snapshot: %+v, want %+v (the store's view)", m, snap.Groups, want)
		}
		if got := m.group.Partitions(); !slices.Equal(got, held[m]) {
			r.t.Errorf("%v's Partitions() = %v, the store says %v", m, got, held[m])
		}
	}
	return out
}

// view reads the group as the store sees it, through a session that never
// joins it.
func (r *groupRig) view() backends.GroupView {
	r.t.Helper()
	ctx := context.Background()
	s, _, err := r.store.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	view, err := s.Members(ctx, "billing")
	if err != nil {
		r.t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		r.t.Fatal(err)
	}
	return view
}

func groupStatusEqual(a, b runtime.GroupStatus) bool {
	return a.Name == b.Name && a.Partitions == b.Partitions && a.Members == b.Members &&
		slices.Equal(a.Held, b.Held) && a.Joined == b.Joined && a.LastError == b.LastError
}

func (r *groupRig) ids() []string {
	var ids []string
	for _, m := range r.members {
		ids = append(ids, m.String())
	}
	return ids
}

// fair reports whether every partition is held by a member and every member
// holds ⌊n/m⌋ or ⌈n/m⌉ of them.
func fair(n int, members, holders []string) bool {
	count := map[string]int{}
	for _, h := range holders {
		if !slices.Contains(members, h) {
			return false
		}
		count[h]++
	}
	lo, hi := n/len(members), (n+len(members)-1)/len(members)
	for _, id := range members {
		if count[id] < lo || count[id] > hi {
			return false
		}
	}
	return true
}

func sessionIDs(ss []string) []backends.SessionID {
	out := make([]backends.SessionID, len(ss))
	for i, s := range ss {
		out[i] = backends.SessionID(s)
	}
	return out
}

// change applies a membership change (gone: the members it removes) and
// checks §13 from what actually happened, read from the partition
// events: by the bound after the change the assignment is fair, every move
// happened within the bound, and the partitions that changed hands are
// exactly the minimum needed to reach a fair state from the state before
// the change, plus one extra hop for each partition a leaving member
// acquired during the change (it handed each of them on as its own leave
// was applied). It returns those extra hops.
//
// The system then runs for three more renewal intervals, a quiet tail in
// which any further move would show, before the state is read.
func (r *groupRig) change(what string, bound time.Duration, apply func(), gone ...int) (extra int) {
	r.t.Helper()
	before := r.holders()
	start := time.Now()
	apply()
	leaving := map[int]bool{}
	for _, id := range gone {
		leaving[id] = true
		delete(r.members, id)
	}
	want := runtime.MinMoves(r.n, sessionIDs(r.ids()), sessionIDs(before))
	time.Sleep(bound + 3*cfg.RenewInterval - time.Since(start))
	synctest.Wait()
	after := r.holders()
	gains, extra, last := r.log.moves(start, leaving)
	if took := last.Sub(start); took > bound || !fair(r.n, r.ids(), after) {
		r.t.Fatalf("%s: fair = %v, last move %v after the change; want fair within %v: %v → %v",
			what, fair(r.n, r.ids(), after), took, bound, before, after)
	}
	if gains != want+extra {
		r.t.Errorf("%s: %d partitions moved, want the minimum %d plus %d extra hops through leaving members (from %v to %v)",
			what, gains, want, extra, before, after)
	}
	free := 0
	for _, h := range before {
		if h == "" {
			free++
		}
	}
	if lost := r.log.lostSince(start); lost != gains-free {
		r.t.Errorf("%s: %d partitions lost, want one per move of a held partition: %d", what, lost, gains-free)
	}
	r.t.Logf("%s: fair %v after the change; %d moves (minimum %d, %d extra hops)", what, last.Sub(start), gains, want, extra)
	return extra
}

// §13: 1 → 3 → 5 → 2 → 1 members of a 16-partition group. After each change
// the assignment converges to fair shares within a bound, moving exactly the
// minimum number of partitions from the state before the change (plus the
// extra hops of concurrent leaves, below); no two members ever hold a valid
// term for one partition; tokens strictly increase per partition; every
// move is one EventPartitionGained and one EventPartitionLost with the
// group, partition and token; Snapshot and Partitions match the store.
//
// The bounds, in renewal intervals (tasks here exit as soon as they are
// cancelled, and the store answers at once):
//   - the first member of an empty group: the settling wait, a tenth of an
//     interval (a member plans only on a view that shows no new member);
//   - a join: 2 (the others see the new member at their next keep-alive,
//     hand over, and the newcomer is woken by the release notifications);
//   - graceful leaves, one or several at once: 0 (a leaver leaves, then
//     releases, and the releases wake the others, who read a view without
//     it);
//   - a crash: LeaseDuration plus 2 (the store expires the session, the next
//     keep-alive of any member notices, the others re-read and take over).
//
// Several members leaving at once can move more than the minimum: a leaver
// whose Stop the engine has not applied yet is still a member, so it may take
// partitions another leaver released, and hands them on when its own Stop
// applies (a member leaves the group before it releases, so it takes nothing
// once its Stop has been applied). Each such partition moves once more than
// needed, so a change moves at most the minimum plus the partitions leaving
// members acquired during it; when every Stop is applied before any release,
// exactly the minimum (TestGroupConcurrentLeavesApplied).
// settle is how long a member that sees new members waits before it plans
// (§13): a tenth of the renewal interval.
var settle = cfg.RenewInterval / 10

func TestGroupRebalancing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGroupRig(t, 16)
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

		// 5 → 2: three members stop at once.
		r.change("5 → 2 (three graceful leaves at once)", 0, func() {
			var wg sync.WaitGroup
			for _, id := range []int{0, 1, 2} {
				leaver := r.members[id]
				wg.Go(func() {
					if err := leaver.group.Stop(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}, 0, 1, 2)
		crashed := r.members[3]
		r.change("2 → 1 (crash)", cfg.LeaseDuration+2*cfg.RenewInterval, func() { crashed.link.Cut() }, 3)
		r.close()
	})
}

// §13: when three members' Stops are all applied before any of them
// releases a partition — here driven so: their links are frozen while the
// Stops are issued, so each leaver's Leave is held until all three engines
// have taken their Stop — no leaver takes a partition, and 5 → 2 moves
// exactly the minimum.
func TestGroupConcurrentLeavesApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGroupRig(t, 16)
		r.change("first member", settle, func() { r.join() })
		r.change("1 → 5", 2*cfg.RenewInterval, func() {
			for range 4 {
				r.join()
			}
		})
		leavers := []*member{r.members[1], r.members[2], r.members[4]}
		extra := r.change("5 → 2 (Stops applied first)", 0, func() {
			var wg sync.WaitGroup
			for _, m := range leavers {
				m.link.Freeze()
				wg.Go(func() {
					if err := m.group.Stop(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			synctest.Wait() // every Stop applied, every Leave held
			for _, m := range leavers {
				m.link.Thaw()
			}
			wg.Wait()
		}, 1, 2, 4)
		if extra != 0 {
			t.Errorf("leavers acquired %d partitions although their Stops were applied first", extra)
		}
		r.close()
	})
}

// §13, H4: Group.StepDown hands every partition over with the hand-off
// order and leaves the group before it returns; the member sits out the
// cooldown, counted from the step-down, out of the group (a member in a
// step-down cooldown leaves it); then it joins again and the group
// rebalances, each time moving the minimum.
func TestGroupStepDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGroupRig(t, 16)
		joinBound := 2 * cfg.RenewInterval
		r.change("first member", settle, func() { r.join() })
		r.change("1 → 2", joinBound, func() { r.join() })
		a, b := r.members[0], r.members[1]

		const cooldown = 10 * time.Second
		var steppedAt time.Time
		r.change("2 → 1 (step-down)", 0, func() {
			steppedAt = time.Now()
			held := a.group.Partitions()
			if err := a.group.StepDown(context.Background(), cooldown); err != nil {
				t.Fatal(err)
			}
			if got := a.group.Partitions(); len(held) == 0 || len(got) != 0 {
				t.Fatalf("StepDown returned with %v of %v still held", got, held)
			}
		}, a.id)
		sitOut := func(when string) {
			t.Helper()
			s := a.client.Snapshot()
			if len(s.Groups) != 1 || s.Groups[0].Joined || len(s.Groups[0].Held) != 0 {
				t.Errorf("%s: the stepped-down member's snapshot is %+v, want not joined, nothing held", when, s.Groups)
			}
			view := r.view()
			if slices.Contains(view.Members, s.Session) {
				t.Errorf("%s: the store lists the stepped-down member: %v", when, view.Members)
			}
			if got := b.group.Partitions(); len(got) != r.n {
				t.Errorf("%s: the other member holds %v, want all %d", when, got, r.n)
			}
		}
		sitOut("during the cooldown")
		time.Sleep(cooldown - time.Since(steppedAt) - time.Millisecond)
		sitOut("just before the cooldown ends")
		r.change("1 → 2 (the cooldown is over)", time.Millisecond+joinBound, func() { r.members[a.id] = a })

		if err := a.group.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := a.group.StepDown(context.Background(), time.Second); !errors.Is(err, runtime.ErrStopped) {
			t.Errorf("StepDown after Stop = %v, want ErrStopped", err)
		}
		if err := b.group.StepDown(context.Background(), -time.Second); !errors.Is(err, runtime.ErrInvalidConfig) {
			t.Errorf("StepDown with a negative cooldown = %v, want ErrInvalidConfig", err)
		}
		r.close()
	})
}
