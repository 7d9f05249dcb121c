package engine

import (
	"errors"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/schedulerecord"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// A Cron or Timetable schedule's slots are the instants its timetable
// gives, on the store's clock, in whole milliseconds (R1). A slot is
// recorded by its instant, as a fixed-rate slot is by its start, but it
// is claimed before its run starts: its instant is written in the lease's
// value with the term's token, and the run starts only once the store took
// the write. A later term reads the claim and never starts the slot again,
// and a term the store no longer honours cannot claim: a slot runs at most
// once, across fail-overs and clock differences between nodes. A run that
// fails, or is interrupted, is not run again.

// nextSlot returns tt's first slot strictly after t, rounded up to the
// millisecond; ok is false when there is none, or when tt breaks its
// contract (an instant not after t).
func nextSlot(tt vocab.Timetable, t time.Time) (slot time.Time, ok bool) {
	at := tt.Next(t)
	if at.IsZero() || !at.After(t) {
		return time.Time{}, false
	}
	ms := at.UnixMilli()
	if at.After(time.UnixMilli(ms)) {
		ms++
	}
	return time.UnixMilli(ms), true
}

// latestSlot returns tt's latest slot in (lo, now], or false if there is
// none. It searches in O(log((now−lo)/1ms)) calls of Next, whatever the
// slots' density: the latest slot is the next one after the last instant x
// in [lo, now) that still has a slot in (x, now].
func latestSlot(tt vocab.Timetable, lo, now time.Time) (time.Time, bool) {
	// In whole milliseconds, like the slots: a slot in (lo, now] is one in
	// (⌊lo⌋, ⌊now⌋], and none is in (⌊now⌋, now].
	loMs, hiMs := lo.UnixMilli(), now.UnixMilli()
	in := func(x int64) bool {
		s, ok := nextSlot(tt, time.UnixMilli(x))
		return ok && s.UnixMilli() <= hiMs
	}
	if loMs >= hiMs || !in(loMs) {
		return time.Time{}, false
	}
	for hiMs-loMs > 1 { // in(loMs) and !in(hiMs)
		mid := loMs + (hiMs-loMs)/2
		if in(mid) {
			loMs = mid
		} else {
			hiMs = mid
		}
	}
	return nextSlot(tt, time.UnixMilli(loMs))
}

// planSlot finds the slot t's timetable runs next, on the store's clock
// store: the latest slot not recorded that may still run — after a
// fail-over or a pause, one at most CatchUp old; after a run, one that came
// during it if Overlap is OverlapAfter — to run now (due ≤ store), else the
// next slot to come. ok is false when the timetable has no more slots.
func (r *run) planSlot(store time.Time) (due time.Time, ok bool) {
	tt := r.spec.Timetable
	lo := store.Add(-r.spec.CatchUp - time.Millisecond)
	if r.afterRun {
		lo = store.Add(-time.Millisecond)
		if r.spec.Overlap == vocab.OverlapAfter && r.hasLast {
			lo = r.last
		}
	}
	if r.hasLast && r.last.After(lo) {
		lo = r.last
	}
	if due, ok = latestSlot(tt, lo, store); ok {
		return due, true
	}
	from := store
	if r.hasLast && r.last.After(from) {
		from = r.last
	}
	return nextSlot(tt, from)
}

// slotGrace is how late a slot planned ahead may start and still run when
// it is older than CatchUp: what a timer firing late may add. A wait for the
// renewal a step check needs adds RenewInterval to it; a pause of the
// process that is longer makes the slot a missed one.
const slotGrace = time.Second

// slotPassed reports whether the slot r planned counts as missed on the
// store's clock store: a later slot has come, or it is older than CatchUp
// and has waited more than grace since it was ready to run (its instant, or
// when it was planned if later) — grace being what a timer or a wait for
// the renewal a step check needs may add; a pause of the process is
// longer. The plan is then made again, with the catch-up window.
func (r *run) slotPassed(store time.Time, grace time.Duration) bool {
	if store.Sub(r.slotAt) > r.spec.CatchUp && store.Sub(r.slotReady) > grace {
		return true
	}
	next, ok := nextSlot(r.spec.Timetable, r.slotAt)
	return ok && !next.After(store)
}

// claim writes t's planned slot in the lease's value, with the term's
// token, before its run starts (t's work counts as running meanwhile, so a
// hand-off waits for the answer, H1). The slot is never planned again in
// this term, whatever the answer.
func (m *Machine) claim(t *term) {
	r := t.run
	s, live := m.current(t.sess.gen)
	r.last, r.hasLast = r.slotAt, true
	if !live || t.ended {
		m.runFinished(t, true)
		return
	}
	req := Request{Kind: ReqPutValue, Gen: s.gen, Name: t.c.name, Token: t.token,
		Value: schedulerecord.Encode(schedulerecord.Cron, r.slotAt), Timeout: s.period}
	if mutant == "run-before-claim" {
		m.send(req, &pendingReq{}) // the claim's answer is not awaited
		m.startRun(t)
		return
	}
	r.state = runClaiming
	m.send(req, &pendingReq{t: t})
}

// claimDone starts t's run once the store took its slot's claim. A term
// that ended meanwhile does not run it; a claim the store refused for a
// later holder ends the term's runs; a claim whose fate is unknown (an
// error, a timeout) may have been written, so the slot is passed over.
func (m *Machine) claimDone(t *term, err error) {
	r := t.run
	switch {
	case err == nil && !t.ended && m.stepOK(t, r.spec.Step):
		m.startRun(t)
	case err == nil && !t.ended:
		// The term no longer passes the step check (E1): the claimed slot
		// waits for the next renewal, as an unclaimed one would.
		r.claimed = true
		t.taskRunning = false
		t.c.tasks--
		r.state = runWaitRenewal
		m.waiting = append(m.waiting, t)
	case errors.Is(err, backends.ErrNotHolder) || t.ended:
		m.runFinished(t, true)
	default:
		m.event(vocab.Event{Kind: vocab.EventBackendError, Name: t.c.name, Token: t.token, Err: err})
		m.runFinished(t, false)
	}
}
