package engine

// Acquisitions are paced: at most acquireSlots are in flight at once, and a
// candidate that finds every slot taken waits in line, first come, first
// served, until a reply frees one. A client that starts a million elections
// therefore sends a steady stream of attempts, each timed from when it is
// sent, rather than a million at once that wait past their timeouts in the
// driver's and the store's queues and come back in waves of retries. The
// slots are as many as a Close's batch (close.go): enough to keep a store
// busy, few enough that the calls of the session's renewals are not queued
// behind them.
const acquireSlots = closeBatch

// pacer counts the acquisitions in flight and keeps the line of candidates
// waiting for a slot.
type pacer struct {
	inFlight int
	line     []*contender
	inLine   map[*contender]bool // only while someone waits, so that an idle client keeps no map
}

// take reports whether c may send its attempt now, taking a slot; if not,
// c waits in line (once, however often it asks).
func (p *pacer) take(c *contender) bool {
	if p.inFlight < acquireSlots {
		p.inFlight++
		return true
	}
	if p.inLine == nil {
		p.inLine = make(map[*contender]bool)
	}
	if !p.inLine[c] {
		p.inLine[c] = true
		p.line = append(p.line, c)
	}
	return false
}

// done frees the slot of an acquisition that was answered, and lets the
// first in line that still wants to attempt take it.
func (p *pacer) done(m *Machine) {
	p.inFlight--
	for len(p.line) > 0 && p.inFlight < acquireSlots {
		c := p.line[0]
		p.line[0] = nil
		p.line = p.line[1:]
		delete(p.inLine, c)
		m.maybeAttempt(c) // it may no longer want to (stopped, elected, closing)
	}
	if len(p.line) == 0 {
		p.line, p.inLine = nil, nil
	}
}
