package engine

import (
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// The core's answers to the driver's questions, as raft's Status: each
// reads state and changes nothing. The runtime's Snapshot is built here,
// in the vocabulary's types, so that the driver converts nothing.

// State returns the session's state, whether a Close is in progress, and
// the backend's last failure (nil after a success).
func (m *Machine) State() (state vocab.SessionState, closing bool, lastErr error) {
	return m.state, m.closing != nil, m.lastErr
}

// Session returns the live session's generation, id and renewal period; ok
// is false while there is none.
func (m *Machine) Session() (gen uint64, id backends.SessionID, period time.Duration, ok bool) {
	if s := m.sess; s != nil && !s.ended {
		return s.gen, s.id, s.period, true
	}
	return 0, "", 0, false
}

// Wanted reports whether the core still wants request id made: it was sent
// and is not answered, and it is not an acquire whose election abandoned it
// (a Stop, a step-down or a Close while it was in flight; A3). A driver
// that queues requests asks before it makes one, and answers one the core
// no longer wants with [ErrNotMade] instead: under a start storm a Close
// must not wait for a million acquires that nobody wants any more.
func (m *Machine) Wanted(id RequestID) bool {
	p, ok := m.pending[id]
	return ok && !(p.req.Kind == ReqAcquire && p.abandoned)
}

// LeaderTermInfo returns contender id's term while it leads and the term
// has not ended: its id, lease name, token and session generation. A
// driver that keeps no record of a quiet term (Effect.Quiet) makes one
// from this when it is asked for the term.
func (m *Machine) LeaderTermInfo(id ContenderID) (tid TermID, name string, token Token, gen uint64, ok bool) {
	c := m.byID[id]
	if c == nil || c.phase != phLeader || c.term == nil || c.term.ended {
		return 0, "", 0, 0, false
	}
	return c.term.id, c.name, c.term.token, c.term.sess.gen, true
}

// Stopped reports whether contender id is stopped (or was never started).
func (m *Machine) Stopped(id ContenderID) bool {
	c := m.byID[id]
	return c == nil || c.removed || c.phase == phDone
}

// Refusal returns the holder that refused contender id's last attempt, if
// any.
func (m *Machine) Refusal(id ContenderID) *backends.HeldError {
	if c := m.byID[id]; c != nil {
		return c.refused()
	}
	return nil
}

// GroupRemoved reports whether group id is stopped (or was never started).
func (m *Machine) GroupRemoved(id GroupID) bool { return m.groupByID[id] == nil }

// HeldPartitions returns the partitions of group id this member leads, in
// ascending order.
func (m *Machine) HeldPartitions(id GroupID) []int {
	g := m.groupByID[id]
	if g == nil {
		return nil
	}
	var held []int
	for _, i := range g.partIndexes() {
		if g.parts[i].phase == phLeader {
			held = append(held, i)
		}
	}
	return held
}

// ScheduleStatus returns the runs of schedule id so far, with the times
// on the driver's clock whose zero is epoch (see [RunStatus.At]).
func (m *Machine) ScheduleStatus(id ContenderID, epoch time.Time) (vocab.ScheduleStatus, bool) {
	if c := m.byID[id]; c != nil && c.runStatus() != nil {
		return c.runStatus().At(epoch), true
	}
	return vocab.ScheduleStatus{}, false
}

// Snapshot returns the state at now, as the runtime shows it: the local
// times in it are on the driver's clock whose zero is epoch (Mono m is
// epoch.Add(m)).
func (m *Machine) Snapshot(now Mono, epoch time.Time) vocab.Snapshot {
	snap := vocab.Snapshot{State: m.state, LastError: m.lastErr}
	if s := m.sess; s != nil {
		snap.Session = s.id
		snap.Remaining = max(0, s.deadline-now)
		snap.RenewPeriod = s.period
	}
	if snap.Remaining > 0 {
		snap.Deadline = epoch.Add(now + snap.Remaining)
	}
	for _, g := range m.groupList {
		if g.removed {
			continue
		}
		gs := vocab.GroupStatus{Name: g.name, Partitions: g.n, Held: m.HeldPartitions(g.id), Joined: g.joined,
			LastError: g.lastErr}
		if g.viewed {
			gs.Members = len(g.view.Members)
		}
		for _, i := range gs.Held {
			t := g.parts[i].term
			ps := vocab.PartitionStatus{Index: i, Token: t.token, Remaining: m.remaining(t, now)}
			if rs := g.status[i]; rs != nil {
				ss := rs.At(epoch)
				ps.Schedule = &ss
			}
			gs.PerPartition = append(gs.PerPartition, ps)
		}
		snap.Groups = append(snap.Groups, gs)
	}
	for _, c := range m.contenders {
		if c.removed || c.group != nil {
			continue
		}
		ls := vocab.LeaseStatus{Name: c.name, Lock: c.kind == KindLock}
		if rs := c.runStatus(); rs != nil {
			ss := rs.At(epoch)
			ls.Schedule = &ss
		}
		switch {
		case c.phase == phLeader:
			ls.Role, ls.Token, ls.Remaining = vocab.RoleLeader, c.term.token, m.remaining(c.term, now)
		case c.phase == phHandoff:
			ls.Role, ls.Token = vocab.RoleHandingOff, c.term.token
		case c.cooldown() > now:
			ls.Role, ls.Cooldown = vocab.RoleCoolingDown, c.cooldown()-now
		}
		snap.Leases = append(snap.Leases, ls)
	}
	return snap
}

// remaining is t's validity left at now, as its Term reports it (T3).
func (m *Machine) remaining(t *term, now Mono) time.Duration {
	if t.ended {
		return 0
	}
	return max(0, t.sess.deadline-now)
}
