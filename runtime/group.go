package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
)

// groupState is the machine's record of a partition group this client
// joined (SPEC §13). Its partitions are contenders like any other, created
// when the balance assigns a partition here and removed when it moves away.
type groupState struct {
	name string
	n    int
	task func(ctx context.Context, t *Term, partition int) error
	info func(partition int) *runInfo // the driver's per-partition status, if scheduled

	parts    map[int]*contender // partitions this member holds or contends for
	joined   bool               // a member, on the current session
	viewed   bool               // view is from the current session
	view     backends.GroupView
	joinReq  uint64
	viewReq  uint64
	reread   bool // something changed while viewReq was in flight
	leaveReq uint64
	joinAt   mono // earliest next join (retry, or the end of a step-down)
	lastErr  error
	op       *stopOp
	removed  bool
	timerSeq uint64
}

// reserved reports whether name is a partition lease of a started group.
func (m *machine) reserved(name string) bool {
	g, i, ok := backends.SplitPartition(name)
	return ok && m.groups[g] != nil && i < m.groups[g].n
}

// startGroup registers g and joins it when the session is live.
func (m *machine) startGroup(now mono, g *groupState) error {
	m.advance(now)
	defer m.settle()
	if m.closing != nil || m.state == SessionClosed {
		return ErrClosed
	}
	if m.groups[g.name] != nil {
		return ErrNameInUse
	}
	for name := range m.byName {
		if group, i, ok := backends.SplitPartition(name); ok && group == g.name && i < g.n {
			return fmt.Errorf("%w (%q, its partition %d, is started)", ErrNameInUse, name, i)
		}
	}
	g.parts = make(map[int]*contender)
	m.groups[g.name] = g
	m.groupList = append(m.groupList, g)
	m.wakeGroup(g)
	return nil
}

func (m *machine) scheduleGroup(g *groupState, at mono) {
	g.timerSeq++
	m.pushTimer(timerEntry{at: at, g: g, seq: g.timerSeq})
}

// wakeGroup joins g if it should be a member and is not.
func (m *machine) wakeGroup(g *groupState) {
	s := m.sess
	if g.removed || g.op != nil || g.joined || g.joinReq != 0 || s == nil || m.closing != nil {
		return
	}
	if m.now < g.joinAt {
		m.scheduleGroup(g, g.joinAt)
		return
	}
	g.joinReq = m.send(request{kind: reqJoin, gen: s.gen, group: g.name, n: g.n, timeout: s.period}, &pendingReq{g: g})
}

// refreshGroups re-reads the view of every joined group; called when the
// keep-alive digest says some group changed.
func (m *machine) refreshGroups() {
	for _, g := range m.groupList {
		m.readView(g)
	}
}

func (m *machine) readView(g *groupState) {
	s := m.sess
	if g.removed || !g.joined || s == nil {
		return
	}
	if g.viewReq != 0 {
		g.reread = true // the read in flight may predate the change
		return
	}
	g.reread = false
	g.viewReq = m.send(request{kind: reqMembers, gen: s.gen, group: g.name, timeout: s.period}, &pendingReq{g: g})
}

func (m *machine) groupDone(p *pendingReq, res result) {
	g := p.g
	s, live := m.current(p.req.gen)
	switch p.req.kind {
	case reqJoin:
		g.joinReq = 0
	case reqMembers:
		g.viewReq = 0
	case reqLeave:
		g.leaveReq = 0
	}
	if !live {
		return
	}
	if errors.Is(res.err, backends.ErrSessionExpired) {
		m.sessionLost(ReasonSessionExpired)
		return
	}
	if res.err != nil {
		err := res.err
		if p.req.kind == reqJoin && errors.Is(err, backends.ErrGroupMismatch) {
			err = fmt.Errorf("simba: group %q: cannot join with %d partitions until every member with another count has left: %w",
				g.name, g.n, err)
		}
		g.lastErr = err
		m.event(Event{Kind: EventBackendError, Name: g.name, Group: g.name, Err: err})
		switch p.req.kind {
		case reqJoin:
			g.joinAt = m.now + m.cfg.RenewInterval/2 + m.jitter()
			m.wakeGroup(g)
		case reqMembers:
			s.digest.Groups = ^s.digest.Groups // read again after the next renewal
		case reqLeave:
			g.joined = false // the session's end will end the membership
		}
		return
	}
	g.lastErr = nil
	switch p.req.kind {
	case reqJoin:
		g.joined = true
		if g.op != nil {
			return // stopped meanwhile: groupProgress leaves
		}
		// Watch every partition: a release anywhere in the group makes
		// this member re-read the view at once (SPEC A1).
		for i := range g.n {
			m.emit(effect{kind: effWatch, req: request{gen: s.gen, name: backends.PartitionName(g.name, i)}})
		}
		m.readView(g)
	case reqMembers:
		g.view, g.viewed = res.view, true
		if g.reread {
			m.readView(g)
		}
		m.rebalance(g, s)
	case reqLeave:
		g.joined = false
	}
}

// rebalance moves this member towards the group's fair assignment: it gives
// up the partitions assigned elsewhere (with the hand-off order) and contends
// for those assigned here (SPEC §13).
func (m *machine) rebalance(g *groupState, s *session) {
	if g.op != nil || g.removed || !g.joined || !g.viewed {
		return
	}
	if !slices.Contains(g.view.Members, s.id) {
		// The view does not list us (the join raced with the read): read again.
		m.readView(g)
		return
	}
	holders := make([]backends.SessionID, g.n)
	copy(holders, g.view.Holders)
	for i, h := range holders {
		if c := g.parts[i]; c != nil && c.phase == phLeader {
			holders[i] = s.id // ours, whatever a stale view says
		} else if h == s.id {
			holders[i] = "" // being released, or lost
		}
	}
	plan := assign(g.n, g.view.Members, holders)
	for i, c := range g.parts {
		if plan[i] != s.id && (c.op == nil || c.op.stepDown) {
			m.stop(c, false, 0, nil)
		}
	}
	for i, owner := range plan {
		// Contend only for partitions free in this view. One assigned here
		// but still held will be released by its holder; its release
		// notification (or the next renewal's digest) makes this member
		// read the view again, and only then take it: acting on a plan
		// from a view that may be stale could move a partition twice.
		if owner != s.id || g.parts[i] != nil || holders[i] != "" {
			continue
		}
		c := &contender{name: backends.PartitionName(g.name, i), cat: catGroup, group: g, part: i}
		if g.task != nil {
			c.task = func(ctx context.Context, t *Term) error { return g.task(ctx, t, i) }
		}
		if g.info != nil {
			c.info = g.info(i)
		}
		g.parts[i] = c
		m.add(c)
		c.phase, c.retryAt = phCandidate, m.now
		m.maybeAttempt(c)
	}
}

// stopGroup hands every partition over and leaves the group; with stepDown
// the group joins again cooldown after (SPEC §13: a member in a step-down
// cooldown leaves the group).
func (m *machine) stopGroup(g *groupState, stepDown bool, cooldown time.Duration, w waiter) {
	if g.removed {
		m.complete(w, nil, nil)
		return
	}
	if op := g.op; op != nil {
		if !stepDown {
			op.stepDown = false
		}
		if w != nil {
			op.waiters = append(op.waiters, w)
		}
		return
	}
	g.op = &stopOp{stepDown: stepDown, cooldown: cooldown, at: m.now}
	if w != nil {
		g.op.waiters = append(g.op.waiters, w)
	}
	m.groupProgress(g)
}

func (m *machine) stopGroupInput(now mono, g *groupState, stepDown bool, cooldown time.Duration, w waiter) {
	m.advance(now)
	defer m.settle()
	m.stopGroup(g, stepDown, cooldown, w)
}

// groupProgress moves a group's stop forward: first it leaves the group, so
// that the other members plan without it and contend for its partitions;
// then it hands each partition over (task cancelled and awaited, lease
// released), which wakes the others at once; then it completes the waiters.
func (m *machine) groupProgress(g *groupState) {
	if g.joinReq != 0 || g.leaveReq != 0 {
		return
	}
	if s := m.sess; g.joined && s != nil {
		g.leaveReq = m.send(request{kind: reqLeave, gen: s.gen, group: g.name, timeout: s.period}, &pendingReq{g: g})
		return
	}
	g.joined = false
	for _, c := range g.parts {
		if c.op == nil || c.op.stepDown {
			m.stop(c, false, 0, nil)
		}
	}
	if len(g.parts) > 0 {
		return
	}
	op := g.op
	g.op, g.viewed = nil, false
	for _, w := range op.waiters {
		m.complete(w, nil, nil)
	}
	if s := m.sess; s != nil {
		for i := range g.n {
			m.emit(effect{kind: effUnwatch, req: request{gen: s.gen, name: backends.PartitionName(g.name, i)}})
		}
	}
	if op.stepDown {
		g.joinAt = op.at + op.cooldown
		m.wakeGroup(g)
		return
	}
	g.removed = true // compact drops it from groupList
	delete(m.groups, g.name)
}

// PartitionFunc is the work of one partition of a group: it gets the
// partition's term (its own token) and index.
type PartitionFunc func(ctx context.Context, t *Term, partition int) error

// Group is a partition group joined by a client. Create it with
// [Client.StartGroup].
type Group struct {
	client *Client
	g      *groupState
}

// StartGroup joins the partition group name, whose partition i is the lease
// "name.i" (SPEC §13), and runs fn for each partition this member holds: once
// per term if s has neither Rate nor Delay (a task that returns early leaves
// the partition held and idle until a rebalance moves it, so that its work is
// not rerun elsewhere), else on s's schedule, with slots recorded per
// partition.
//
// Members join through their session; the partitions are balanced so that
// every member holds ⌊N/M⌋ or ⌈N/M⌉ of them, moving as few as possible when
// members come and go: a member contends only for its share, and hands its
// highest-numbered surplus over with the hand-off order (the partition's task
// cancelled and awaited, then the lease released). A member that crashes
// loses its partitions to the others once the backend expires its session.
//
// Each change of membership on its own moves the minimum number of
// partitions. When several members leave at once, a leaver whose leave has
// not been applied yet still counts as a member: it may pick up a partition
// another leaver released, then hand it on when it leaves, so such a
// partition moves twice.
//
// With a store that answers promptly and tasks that return when cancelled,
// a join is balanced within two renewal intervals, graceful leaves (one or
// several at once) at once, and a crash within LeaseDuration plus two
// renewal intervals (the runtime's group tests check these bounds).
//
// The partition count is recorded by the first member; joining with another
// count fails. StartGroup does not wait for the join, so the failure is
// reported later: in the group's [GroupStatus.LastError] and as an
// EventBackendError, logged as a warning, whose error names the group and
// this member's count and wraps the backend's error (which gives the
// group's count) and [backends.ErrGroupMismatch]. The join is retried, so
// the member joins once every member with the other count has left.
//
// partitions must be in [1, 65536] and every partition lease a valid name.
func (c *Client) StartGroup(name string, partitions int, s Schedule, fn PartitionFunc) (*Group, error) {
	if fn == nil {
		return nil, errors.New("simba: StartGroup: nil function")
	}
	if err := backends.ValidateGroup(name, partitions); err != nil {
		return nil, fmt.Errorf("simba: start group: %w", err)
	}
	if err := s.validate(c.cfg, true); err != nil {
		return nil, fmt.Errorf("simba: start group %q: %w", name, err)
	}
	g := &groupState{name: name, n: partitions}
	if s.once() {
		g.task = func(ctx context.Context, t *Term, i int) error {
			if !c.waitValid(ctx, t, s.Step, time.Now().Add(s.Initial)) {
				return nil
			}
			return fn(ctx, t, i)
		}
	} else {
		if _, ok := c.backend.(backends.StoreClock); !ok {
			return nil, fmt.Errorf("simba: start group %q: the backend (%T) has no store clock to number slots with", name, c.backend)
		}
		var mu sync.Mutex
		infos := make(map[int]*runInfo)
		g.info = func(i int) *runInfo {
			mu.Lock()
			defer mu.Unlock()
			if infos[i] == nil {
				infos[i] = &runInfo{group: name, part: i}
			}
			return infos[i]
		}
		g.task = func(ctx context.Context, t *Term, i int) error {
			run := func(ctx context.Context, t *Term) error { return fn(ctx, t, i) }
			return c.runSchedule(ctx, t, s, g.info(i), run)
		}
	}
	var err error
	c.apply(func(now mono) { err = c.m.startGroup(now, g) })
	if err != nil {
		return nil, fmt.Errorf("simba: start group %q: %w", name, err)
	}
	return &Group{client: c, g: g}, nil
}

// waitValid waits until local time notBefore and until t stays valid for
// more than step, re-checking after each renewal; it reports false if the
// term ended first.
func (c *Client) waitValid(ctx context.Context, t *Term, step time.Duration, notBefore time.Time) bool {
	if !sleepCtx(ctx, time.Until(notBefore)) {
		return false
	}
	for t.EnsureValid(step) != nil {
		select {
		case <-c.renewedChan():
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Name returns the group's name.
func (g *Group) Name() string { return g.g.name }

// Partitions returns the partitions this member holds a valid term for, in
// ascending order.
func (g *Group) Partitions() []int {
	g.client.mu.Lock()
	defer g.client.mu.Unlock()
	return heldPartitions(g.g)
}

func heldPartitions(g *groupState) []int {
	var held []int
	for i, c := range g.parts {
		if c.phase == phLeader {
			held = append(held, i)
		}
	}
	slices.Sort(held)
	return held
}

// Stop hands every partition over with the hand-off order and leaves the
// group; ctx bounds only the wait. Called from inside a partition task (with
// its context), it queues the stop and returns nil (L5).
func (g *Group) Stop(ctx context.Context) error { return g.client.stopGroup(ctx, g.g, false, 0) }

// StepDown hands every partition over and leaves the group for cooldown,
// then joins again (SPEC §13: a member in a step-down cooldown leaves the
// group).
func (g *Group) StepDown(ctx context.Context, cooldown time.Duration) error {
	if cooldown < 0 {
		return &ConfigError{"cooldown", cooldown.String(), ">= 0"}
	}
	g.client.mu.Lock()
	removed := g.g.removed
	g.client.mu.Unlock()
	if removed {
		return fmt.Errorf("simba: step down group %q: %w", g.g.name, ErrStopped)
	}
	return g.client.stopGroup(ctx, g.g, true, cooldown)
}

func (c *Client) stopGroup(ctx context.Context, g *groupState, stepDown bool, cooldown time.Duration) error {
	return c.await(ctx, func(now mono, w waiter) { c.m.stopGroupInput(now, g, stepDown, cooldown, w) })
}
