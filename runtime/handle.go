package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/runtime/internal/engine"
)

// handle is what an [Election], a [ScheduledTask] and a [Group] share: the
// driver, the name, and the id the core knows them by. Their Name, Stop,
// StepDown and Term are this one implementation; each type's methods only
// give it the documentation that fits.
type handle struct {
	d     *driver
	name  string
	id    engine.ContenderID // an election's or a schedule's; 0 for a group
	group engine.GroupID     // a group's; 0 otherwise
}

// stop hands over what the handle holds and ends it, waiting for the
// hand-off or for ctx (L5 inside a callback or task).
func (h *handle) stop(ctx context.Context) error {
	if ctx == nil {
		return h.nilContext("stop")
	}
	return h.stopInput(ctx, false, 0)
}

// what is "group " for a group's handle, "" otherwise.
func (h *handle) what() string {
	if h.group != 0 {
		return "group "
	}
	return ""
}

// nilContext is the error of call op given a nil context (see misuse.go).
func (h *handle) nilContext(op string) error {
	return fmt.Errorf("simba: %s %s%q: nil context: %w", op, h.what(), h.name, ErrNilArgument)
}

// stepDown hands over what the handle holds and sits out for cooldown; it
// refuses a cooldown outside [0, MaxDuration] and a handle already stopped
// ([ErrStopped], or [ErrClosed] once the client is closing).
func (h *handle) stepDown(ctx context.Context, cooldown time.Duration) error {
	if ctx == nil {
		return h.nilContext("step down")
	}
	if err := checkCooldown("cooldown", cooldown); err != nil {
		return err
	}
	var stopped, closing bool
	h.d.query(func(m *engine.Machine) {
		if h.group != 0 {
			stopped = m.GroupRemoved(h.group)
		} else {
			stopped = m.Stopped(h.id)
		}
		state, c, _ := m.State()
		closing = c || state == SessionClosed
	})
	if stopped && closing {
		return fmt.Errorf("simba: step down %s%q: %w", h.what(), h.name, ErrClosed)
	}
	if stopped {
		return fmt.Errorf("simba: step down %s%q: %w", h.what(), h.name, ErrStopped)
	}
	return h.stopInput(ctx, true, cooldown)
}

// stopInput steps the Stop (or StopGroup) of the handle and waits for it.
// An election's or a schedule's caller makes the release of its lease
// itself, when ctx allows (awaitName); a group's leave releases many.
func (h *handle) stopInput(ctx context.Context, stepDown bool, cooldown time.Duration) error {
	if h.group != 0 {
		return h.d.await(ctx, func(w engine.Waiter) engine.Input {
			return engine.StopGroup{ID: h.group, StepDown: stepDown, Cooldown: cooldown, Waiter: w}
		})
	}
	return h.d.awaitName(ctx, h.name, func(w engine.Waiter) engine.Input {
		return engine.Stop{ID: h.id, StepDown: stepDown, Cooldown: cooldown, Waiter: w}
	})
}

// term returns the term an election or schedule holds now, or nil.
func (h *handle) term() *Term { return h.d.leaderTerm(h.id) }
