package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// group is the core's record of a partition group this client joined
// (§13). Its partitions are contenders like any other, created when the
// balance assigns a partition here and removed when it moves away.
type group struct {
	id     GroupID
	name   string
	n      int
	sched  vocab.Schedule     // zero: a task once per term
	status map[int]*RunStatus // per partition, if scheduled

	parts    map[int]*contender // partitions this member holds or contends for
	joined   bool               // a member, on the current session
	viewed   bool               // view is from the current session
	view     backends.GroupView
	joinReq  RequestID
	viewReq  RequestID
	reread   bool // something changed while viewReq was in flight
	leaveReq RequestID
	joinAt   Mono // earliest next join (retry, or the end of a step-down)
	settleAt Mono // a joined member reads the view again then (joins settling), 0 if not
	lastErr  error
	op       *stopOp
	removed  bool
	timerSeq uint64
}

// partIndexes returns the partitions g holds or contends for, ascending,
// so that what the core does for them comes in the same order every run.
func (g *group) partIndexes() []int { return slices.Sorted(maps.Keys(g.parts)) }

// reserved reports whether name is a partition lease of a started group.
func (m *Machine) reserved(name string) bool {
	g, i, ok := backends.SplitPartition(name)
	return ok && m.groups[g] != nil && i < m.groups[g].n
}

// startGroup registers a group and joins it when the session is live.
func (m *Machine) startGroup(in StartGroup) error {
	if m.closing != nil || m.state == vocab.SessionClosed {
		return ErrClosed
	}
	if in.ID == 0 || m.groupByID[in.ID] != nil {
		panic(fmt.Sprintf("engine: StartGroup with id %d, zero or in use", in.ID))
	}
	if m.groups[in.Name] != nil {
		return ErrNameInUse
	}
	// Report the lowest-numbered partition started by another name, so
	// that the error is the same whatever the map order.
	clash, clashPart := "", -1
	for name := range m.byName {
		if group, i, ok := backends.SplitPartition(name); ok && group == in.Name && i < in.N && (clashPart < 0 || i < clashPart) {
			clash, clashPart = name, i
		}
	}
	if clashPart >= 0 {
		return fmt.Errorf("%w (%q, its partition %d, is started)", ErrNameInUse, clash, clashPart)
	}
	g := &group{id: in.ID, name: in.Name, n: in.N, sched: in.Schedule, parts: make(map[int]*contender)}
	if !vocab.Once(g.sched) {
		g.status = make(map[int]*RunStatus)
	}
	m.groups[g.name] = g
	m.groupByID[g.id] = g
	m.groupList = append(m.groupList, g)
	m.wakeGroup(g)
	return nil
}

// groupSettle is how long a member waits for joins to settle before it
// plans on a view that shows new members: a tenth of the renewal interval.
func groupSettle(cfg vocab.Config) time.Duration { return max(cfg.RenewInterval/10, time.Millisecond) }

// joinedSince reports whether members (sorted) lists a member that prev
// (sorted) does not.
func joinedSince(prev, members []backends.SessionID) bool {
	for _, id := range members {
		if _, found := slices.BinarySearch(prev, id); !found {
			return true
		}
	}
	return false
}

// groupTimer handles g's wake-up: the end of a settling wait (read the view
// again), or a join that is due.
func (m *Machine) groupTimer(g *group) {
	if g.settleAt != 0 && m.now >= g.settleAt {
		g.settleAt = 0
		if g.joined {
			m.readView(g)
			return
		}
		// Settling on a session that ended: the wake-up may be a join's.
	}
	m.wakeGroup(g)
}

// wakeGroup joins g if it should be a member and is not.
func (m *Machine) wakeGroup(g *group) {
	s := m.sess
	if g.removed || g.op != nil || g.joined || g.joinReq != 0 || s == nil || m.closing != nil {
		return
	}
	if m.now < g.joinAt {
		m.scheduleGroup(g, g.joinAt)
		return
	}
	g.joinReq = m.send(Request{Kind: ReqJoin, Gen: s.gen, Group: g.name, N: g.n, Timeout: s.period}, &pendingReq{g: g})
}

// refreshGroups re-reads the view of every joined group; called when the
// keep-alive digest says some group changed.
func (m *Machine) refreshGroups() {
	for _, g := range m.groupList {
		m.readView(g)
	}
}

func (m *Machine) readView(g *group) {
	s := m.sess
	if g.removed || !g.joined || s == nil {
		return
	}
	if g.viewReq != 0 {
		g.reread = true // the read in flight may predate the change
		return
	}
	g.reread = false
	g.viewReq = m.send(Request{Kind: ReqMembers, Gen: s.gen, Group: g.name, Timeout: s.period}, &pendingReq{g: g})
}

func (m *Machine) groupDone(p *pendingReq, res Result) {
	g := p.g
	s, live := m.current(p.req.Gen)
	switch p.req.Kind {
	case ReqJoin:
		g.joinReq = 0
	case ReqMembers:
		g.viewReq = 0
	case ReqLeave:
		g.leaveReq = 0
	}
	if !live {
		return
	}
	if errors.Is(res.Err, backends.ErrSessionExpired) {
		m.sessionLost(vocab.ReasonSessionExpired)
		return
	}
	if res.Err != nil {
		err := res.Err
		if p.req.Kind == ReqJoin && errors.Is(err, backends.ErrGroupMismatch) {
			err = fmt.Errorf("simba: group %q: cannot join with %d partitions until every member with another count has left: %w",
				g.name, g.n, err)
		}
		g.lastErr = err
		m.event(vocab.Event{Kind: vocab.EventBackendError, Name: g.name, Group: g.name, Err: err})
		switch p.req.Kind {
		case ReqJoin:
			g.joinAt = m.now + m.cfg.RenewInterval/2 + m.jitter()
			m.wakeGroup(g)
		case ReqMembers:
			s.digest.Groups = ^s.digest.Groups // read again after the next renewal
		case ReqLeave:
			g.joined = false // the session's end will end the membership
		}
		return
	}
	g.lastErr = nil
	switch p.req.Kind {
	case ReqJoin:
		g.joined = true
		if g.op != nil {
			return // stopped meanwhile: groupProgress leaves
		}
		// Watch every partition: a release anywhere in the group makes
		// this member re-read the view at once (A1).
		for i := range g.n {
			m.emit(Effect{Kind: EffWatch, Gen: s.gen, Name: backends.PartitionName(g.name, i)})
		}
		m.readView(g)
	case ReqMembers:
		prev, had := g.view.Members, g.viewed
		g.view, g.viewed = res.View, true
		if g.reread {
			m.readView(g)
		}
		if !had || joinedSince(prev, res.View.Members) {
			// Members are joining: more may follow at once (a group
			// started on several nodes together). A plan made now
			// would take partitions that a view with them hands on
			// again; read again a moment later, and plan only on a view
			// that shows no member the one before it did not (§13). A
			// member leaving needs no wait: what it frees is taken at
			// once.
			g.settleAt = m.now + groupSettle(m.cfg)
			m.scheduleGroup(g, g.settleAt)
			return
		}
		m.rebalance(g, s)
	case ReqLeave:
		g.joined = false
	}
}

// rebalance moves this member towards the group's fair assignment: it gives
// up the partitions assigned elsewhere (with the hand-off order) and contends
// for those assigned here (§13).
func (m *Machine) rebalance(g *group, s *session) {
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
	for _, i := range g.partIndexes() {
		if c := g.parts[i]; c != nil && plan[i] != s.id && (c.op == nil || c.op.stepDown) {
			m.stop(c, false, 0, 0)
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
		m.partSeq++
		c := &contender{id: PartitionBit | m.partSeq, name: backends.PartitionName(g.name, i), kind: kindPartition,
			task: true, group: g, part: i}
		if g.status != nil && g.status[i] == nil {
			g.status[i] = &RunStatus{}
		}
		g.parts[i] = c
		m.add(c)
		c.phase, c.retryAt = phCandidate, m.now
		m.maybeAttempt(c)
	}
}

// stopGroup hands every partition over and leaves the group; with stepDown
// the group joins again cooldown after (§13: a member in a step-down
// cooldown leaves the group).
func (m *Machine) stopGroup(g *group, stepDown bool, cooldown time.Duration, w Waiter) {
	if g.removed {
		m.complete(w, 0, nil)
		return
	}
	if op := g.op; op != nil {
		if !stepDown {
			op.stepDown = false
		}
		if w != 0 {
			op.waiters = append(op.waiters, w)
		}
		return
	}
	g.op = &stopOp{stepDown: stepDown, cooldown: cooldown, at: m.now}
	if w != 0 {
		g.op.waiters = append(g.op.waiters, w)
	}
	m.groupProgress(g)
}

// groupProgress moves a group's stop forward: first it leaves the group, so
// that the other members plan without it and contend for its partitions;
// then it hands each partition over (task cancelled and awaited, lease
// released), which wakes the others at once; then it completes the waiters.
func (m *Machine) groupProgress(g *group) {
	if g.joinReq != 0 || g.leaveReq != 0 {
		return
	}
	if s := m.sess; g.joined && s != nil {
		g.leaveReq = m.send(Request{Kind: ReqLeave, Gen: s.gen, Group: g.name, Timeout: s.period}, &pendingReq{g: g})
		return
	}
	g.joined = false
	for _, i := range g.partIndexes() {
		if c := g.parts[i]; c != nil && (c.op == nil || c.op.stepDown) {
			m.stop(c, false, 0, 0)
		}
	}
	if len(g.parts) > 0 {
		return
	}
	op := g.op
	g.op, g.viewed = nil, false
	for _, w := range op.waiters {
		m.complete(w, 0, nil)
	}
	if s := m.sess; s != nil {
		for i := range g.n {
			m.emit(Effect{Kind: EffUnwatch, Gen: s.gen, Name: backends.PartitionName(g.name, i)})
		}
	}
	if op.stepDown {
		g.joinAt = op.at + op.cooldown
		m.wakeGroup(g)
		return
	}
	g.removed = true // compact drops it from groupList
	delete(m.groups, g.name)
	delete(m.groupByID, g.id)
}
