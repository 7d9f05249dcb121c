package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
)

// The store's amnesia guard made visible (design.md §15): a store that is
// new, or may have lost its state, refuses every grant until the longest
// lease it could have granted has passed. Its refusal matches "lease held";
// without this the client only logged, at DEBUG, that the lease was held
// by another session when nobody held it, and a newcomer waited a silent
// minute. The driver notes each refusal: the event (a warning in the log,
// once per guard period) and Snapshot.Recovering say why no lease is
// granted, until when, and how to shorten the wait.

// guard is the amnesia guard as the driver last met it, guarded by the
// driver's mutex.
type guard struct {
	until  mono // when grants resume, on the client's clock; 0 if never met
	logged mono // the end of the guard period last reported
	known  bool // the store said how long (a *RecoveringError); else until is a renewal interval past the last refusal
	err    *backends.RecoveringError
	full   error // the refusal as the backend wrapped it
}

// guardReportSlack is how far the end of a guard may move (each refusal
// measures it anew, with the call's latency) before it counts as a new
// guard period, reported again.
const guardReportSlack = time.Second

// noteGuard notes the reply to an acquire of name: a refusal by the amnesia
// guard starts or extends the guard, reported once per period; a grant
// ends it. The caller holds d.mu.
func (d *driver) noteGuard(now mono, name string, err error) {
	if err == nil {
		d.recovering.until = 0
		return
	}
	if !errors.Is(err, backends.ErrRecovering) {
		return // errors.Is first: a refusal "held" is common, and As allocates its target
	}
	g := &d.recovering
	ongoing := g.err != nil && g.until > now
	var re *backends.RecoveringError
	g.known = errors.As(err, &re)
	if g.known {
		g.until = now + re.Remaining
	} else {
		// A store that does not say how long (an error that only wraps
		// ErrRecovering): the guard stands until a grant, or until a
		// renewal interval passes without a refusal — candidates try
		// every half interval.
		re = &backends.RecoveringError{}
		g.until = now + d.cfg.RenewInterval
	}
	g.err, g.full = re, err
	if g.known && g.until-g.logged < guardReportSlack || !g.known && ongoing {
		return
	}
	g.logged = g.until
	d.queueEvent(Event{Kind: EventStoreRecovering, Name: name, Duration: re.Remaining, Err: err})
}

// recoveringStatus returns the guard for a Snapshot taken at now, or nil
// if no refusal is in force. The caller holds d.mu.
func (d *driver) recoveringStatus(now mono) *Recovering {
	g := &d.recovering
	if g.err == nil || g.until <= now {
		return nil
	}
	if !g.known {
		return &Recovering{Err: g.full} // until when, the store did not say
	}
	return &Recovering{Until: d.epoch.Add(g.until), Remaining: g.until - now, MaxLease: g.err.MaxLease,
		Why: g.err.Why, Err: g.full}
}

// recoveringMessage is the log message of EventStoreRecovering.
func recoveringMessage(remaining time.Duration) string {
	if remaining <= 0 {
		return "simba: no lease is granted for now: the store is new or lost its state, and waits out the " +
			"longest lease it grants (its amnesia guard, docs/design.md §15; the error says more); the backend's " +
			"simba_max_lease shortens the wait"
	}
	return fmt.Sprintf("simba: no lease is granted for %v: the store is new or lost its state, and waits out "+
		"the longest lease it grants (its amnesia guard, docs/design.md §15); the backend's simba_max_lease "+
		"shortens the wait", remaining.Round(time.Millisecond))
}
