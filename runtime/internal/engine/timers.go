package engine

import (
	"container/heap"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// timerEntry is a contender's, a group's or a term's wake-up; entries
// superseded by a later one are skipped (lazy deletion).
type timerEntry struct {
	at  Mono
	c   *contender // or
	g   *group     // or
	t   *term      // this one
	seq uint64
}

func (e timerEntry) live() bool {
	switch {
	case e.c != nil:
		return !e.c.removed && e.c.timerSeq == e.seq
	case e.g != nil:
		return !e.g.removed && e.g.timerSeq == e.seq
	default:
		return !e.t.ended && e.t.timerSeq == e.seq
	}
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// schedule makes c wake at at, replacing any earlier wake-up of c.
func (m *Machine) schedule(c *contender, at Mono) {
	c.timerSeq++
	heap.Push(&m.timers, timerEntry{at: at, c: c, seq: c.timerSeq})
}

// scheduleGroup makes g wake at at, replacing any earlier wake-up of g.
func (m *Machine) scheduleGroup(g *group, at Mono) {
	g.timerSeq++
	heap.Push(&m.timers, timerEntry{at: at, g: g, seq: g.timerSeq})
}

// scheduleTerm makes t's planned run or delayed task due at at.
func (m *Machine) scheduleTerm(t *term, at Mono) {
	t.timerSeq++
	heap.Push(&m.timers, timerEntry{at: at, t: t, seq: t.timerSeq})
}

// fireTimers handles every wake-up due by now, in time order.
func (m *Machine) fireTimers() {
	for len(m.timers) > 0 && m.timers[0].at <= m.now {
		e := heap.Pop(&m.timers).(timerEntry)
		switch {
		case !e.live():
		case e.c != nil:
			e.c.timerSeq++ // consumed
			m.wake(e.c)
		case e.g != nil:
			e.g.timerSeq++
			m.groupTimer(e.g)
		default:
			e.t.timerSeq++
			switch {
			case e.t.run != nil && e.t.run.state == runPlanned:
				m.runDue(e.t)
			case e.t.delay == delayTimer:
				m.delayDue(e.t)
			}
		}
	}
}

// nextWake returns when the machine next needs a Tick, if ever.
func (m *Machine) nextWake() (Mono, bool) {
	var at Mono
	ok := false
	consider := func(t Mono) {
		if !ok || t < at {
			at, ok = t, true
		}
	}
	if s := m.sess; s != nil {
		if mutant != "late-reply-revives" || s.kaReq == 0 {
			consider(s.deadline)
		}
		if s.kaReq == 0 && s.renewAt > 0 {
			consider(s.renewAt)
		}
	} else if m.state != vocab.SessionClosed && m.closing == nil && m.openReq == 0 {
		consider(m.openAt)
	}
	if m.stopMore() {
		consider(m.now) // the next batch of a Close
	}
	if m.state != vocab.SessionClosed {
		for _, l := range m.lost {
			if l.req == 0 {
				consider(l.retryAt) // a close of a session given up, due again (lost.go)
			}
		}
	}
	for len(m.timers) > 0 && !m.timers[0].live() {
		heap.Pop(&m.timers)
	}
	if len(m.timers) > 0 {
		consider(m.timers[0].at)
	}
	return at, ok
}
