package sim

import (
	"math/rand/v2"
	"time"

	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Cron schedules in the simulation (R1–R3 in docs/design.md): in half the
// worlds every node runs a schedule on the lease cronName whose timetable
// has a slot every spacing on the store's clock, and the checker breaks
// R2 if a slot's run starts twice — unless an amnesiac restart of the
// store, which forgets the claims with the leases, came between the two.

// cronName is the schedules' lease: not one of the names the scenario's
// elections and locks use, so no liveness bound applies to it.
const cronName = "cron"

// every is a timetable with a slot every d from the Unix epoch.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := int64(e)
	k := t.UnixNano() / d
	if t.UnixNano()%d < 0 {
		k--
	}
	return time.Unix(0, (k+1)*d)
}

// cronWorld is a world's cron schedule and what the checker knows of its
// runs.
type cronWorld struct {
	on      bool
	spec    vocab.Schedule
	first   map[int64]time.Duration // slot (Unix ms) → true time of its first run
	amnesia time.Duration           // the last amnesiac restart of the store, true time
	runs    int
}

// drawCron draws the world's schedule from a generator of its own, so that
// the draws of the worlds without one stay as they were.
func drawCron(seed uint64, cfg vocab.Config) cronWorld {
	r := rand.New(rand.NewPCG(seed, 0xc405))
	cw := cronWorld{on: r.IntN(2) == 0, first: map[int64]time.Duration{}, amnesia: -1}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo))) }
	spacing := between(cfg.RenewInterval, 3*cfg.LeaseDuration).Truncate(time.Millisecond)
	cw.spec = vocab.Schedule{Timetable: every(spacing), CatchUp: between(0, 2*cfg.LeaseDuration)}
	if r.IntN(2) == 0 {
		cw.spec.Overlap = vocab.OverlapAfter
	}
	return cw
}

// startCron starts the world's schedule on n, if it has one.
func (n *node) startCron() {
	if !n.w.cron.on || n.closed || n.byName[cronName] != nil {
		return
	}
	c := &contender{id: engine.ContenderID(n.newID()), name: cronName, kind: engine.KindSchedule}
	n.contenders[c.id], n.byName[cronName] = c, c
	if err := n.step(engine.Start{ID: c.id, Name: cronName, Kind: engine.KindSchedule,
		TaskEndCooldown: n.w.p.cfg.RenewInterval, Schedule: n.w.cron.spec}); err != nil {
		delete(n.contenders, c.id)
		delete(n.byName, cronName)
	}
}

// run performs a scheduled run (EffStartRun): checked, then over after a
// while, sometimes longer than a slot.
func (n *node) run(e engine.Effect) {
	w, life := n.w, n.life
	w.check.cronRun(n, e)
	d := w.between(0, 2*w.p.maxDelay)
	if w.chance(0.1) {
		d = w.between(0, 2*w.p.cfg.LeaseDuration)
	}
	w.after(d, func() {
		if n.life == life {
			n.step(engine.RunDone{Term: e.Term})
		}
	})
}

// cronRun checks R2 when n starts the run of a slot.
func (c *checker) cronRun(n *node, e engine.Effect) {
	cw := &c.w.cron
	cw.runs++
	if !e.HasSlot {
		c.violate("R1", "n%d started a run of %q without its slot", n.i, cronName)
		return
	}
	slot := e.Slot.UnixMilli()
	if first, ran := cw.first[slot]; ran && first > cw.amnesia {
		c.violate("R2", "n%d started the run of slot %v of %q again (its first run started at %v)",
			n.i, e.Slot.UTC(), cronName, first)
	}
	cw.first[slot] = c.w.now
}
