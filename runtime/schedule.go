package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
)

// Schedule says when leader-only work runs (SPEC §13). Exactly one of Rate
// and Delay is set for [Client.StartSchedule]; for [Client.StartGroup], both
// zero means "once per term".
//
// Fixed rate numbers runs by slot on the store's clock, never a node's: slot
// k is [k·Rate, (k+1)·Rate) in Unix time. The start of the last slot whose
// run succeeded is recorded in the lease's value, written with the term's
// token, so a node elected mid-period does not run a slot the previous leader
// completed, and clock skew between nodes cannot cause a second run. Runs
// never overlap; a run longer than Rate delays the next start to the slot
// current when it ends, and the slots missed meanwhile are skipped, never run
// in a burst.
//
// Fixed delay waits Delay between the end of one run and the start of the
// next; the store-clock time the last successful run ended is recorded the
// same way, so the next leader waits until then plus Delay.
//
// The guarantee, honestly stated: a slot recorded complete is never started
// again by a later term (a higher token); a run interrupted by a fail-over
// before it was recorded runs again on the next leader. Make runs idempotent,
// or fence their writes with the term's token.
type Schedule struct {
	// Rate runs the work in every slot of this length: a whole number of
	// milliseconds, at least 1ms, since slots are counted in milliseconds
	// of the store's clock.
	Rate time.Duration
	// Delay runs the work this long after the previous run ended. It is at
	// least 1ms: the end of a run is recorded in milliseconds of the
	// store's clock, so a shorter delay would not survive a fail-over.
	Delay time.Duration
	// Initial waits this long after each election before the first run.
	Initial time.Duration
	// Step is the validity a run needs: before each run the engine calls
	// EnsureValid(Step); a run that fails the check is not started, and is
	// tried again after the next successful renewal within the same slot.
	Step time.Duration
}

func (s Schedule) once() bool { return s.Rate == 0 && s.Delay == 0 }

// validate checks s against cfg; once tells whether "neither Rate nor Delay"
// is allowed.
func (s Schedule) validate(cfg Config, onceOK bool) error {
	switch {
	case s.Rate < 0 || s.Rate > 0 && s.Rate < time.Millisecond || s.Rate%time.Millisecond != 0:
		return &ConfigError{"Schedule.Rate", s.Rate.String(), ">= 1ms, a whole number of milliseconds (slots are counted in milliseconds of the store's clock)"}
	case s.Delay < 0 || s.Delay > 0 && s.Delay < time.Millisecond:
		return &ConfigError{"Schedule.Delay", s.Delay.String(), ">= 1ms (the end of a run is recorded in milliseconds of the store's clock)"}
	case s.Rate > 0 && s.Delay > 0:
		return &ConfigError{"Schedule.Rate", s.Rate.String(), "0 when Schedule.Delay is set: exactly one of Rate and Delay"}
	case s.once() && !onceOK:
		return &ConfigError{"Schedule.Rate", "0", "> 0, or Schedule.Delay > 0: exactly one of Rate and Delay"}
	case s.Initial < 0:
		return &ConfigError{"Schedule.Initial", s.Initial.String(), ">= 0"}
	case s.Step < 0:
		return &ConfigError{"Schedule.Step", s.Step.String(), ">= 0"}
	}
	// A step that can never pass: after a renewal the term has at most the
	// local validity of a full grant left, and at least RenewInterval less
	// by the time the next renewal is due.
	if limit := cfg.localValidity(cfg.LeaseDuration) - cfg.RenewInterval; s.Step >= limit {
		return &ConfigError{"Schedule.Step", s.Step.String(), fmt.Sprintf(
			"< %v (the local validity of a full lease minus RenewInterval); a longer step could never start", limit)}
	}
	return nil
}

// runInfo is a schedule's status, shared between its loop and Snapshot.
type runInfo struct {
	// group and part name the partition a group's schedule runs for, for
	// its run events; set once, before the schedule starts.
	group string
	part  int

	mu   sync.Mutex
	stat ScheduleStatus
}

func (r *runInfo) update(f func(*ScheduleStatus)) {
	r.mu.Lock()
	f(&r.stat)
	r.mu.Unlock()
}

func (r *runInfo) get() ScheduleStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stat
}

// ScheduleStatus is a schedule's entry in a [Snapshot].
type ScheduleStatus struct {
	Next    time.Time // when the next run is due (local clock), zero if none is planned
	LastRun time.Time // when the last run started
	LastErr error     // the last run's error, nil if it succeeded
	Runs    int       // runs started, over every term of this client
}

// StartSchedule runs fn while this node leads the lease name, as s says
// (SPEC §13). Each run gets the term's context, cancelled when the term ends,
// and the term; a failed or panicking run is reported and the schedule goes
// on. Stop and StepDown follow the hand-off order: the run in progress is
// cancelled and awaited (H1, H2).
//
// Schedules need the store's clock: StartSchedule fails on a backend that
// does not implement backends.StoreClock.
func (c *Client) StartSchedule(name string, s Schedule, fn TaskFunc) (*ScheduledTask, error) {
	if fn == nil {
		return nil, errors.New("simba: StartSchedule: nil function")
	}
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: start schedule: %w", err)
	}
	if err := s.validate(c.cfg, false); err != nil {
		return nil, fmt.Errorf("simba: start schedule %q: %w", name, err)
	}
	if _, ok := c.backend.(backends.StoreClock); !ok {
		return nil, fmt.Errorf("simba: start schedule %q: the backend (%T) has no store clock to number slots with", name, c.backend)
	}
	info := &runInfo{}
	ct := &contender{name: name, cat: catSchedule, info: info, taskEndCooldown: c.cfg.RenewInterval,
		task: func(ctx context.Context, t *Term) error { return c.runSchedule(ctx, t, s, info, fn) }}
	e, err := c.startContender("start schedule", ct)
	if err != nil {
		return nil, err
	}
	return &ScheduledTask{e: e, info: info}, nil
}

// ScheduledTask is a schedule started on a client with [Client.StartSchedule]:
// an election whose terms run the schedule's work.
type ScheduledTask struct {
	e    *Election
	info *runInfo
}

// Name returns the lease name.
func (s *ScheduledTask) Name() string { return s.e.Name() }

// Term returns the term this node currently holds, or nil.
func (s *ScheduledTask) Term() *Term { return s.e.Term() }

// Status returns the schedule's next and last runs, over every term of this
// client.
func (s *ScheduledTask) Status() ScheduleStatus { return s.info.get() }

// Stop ends the schedule with the hand-off order: the run in progress is
// cancelled and awaited (at most until the term's validity runs out), then
// the lease is released (H1). ctx bounds only the wait.
func (s *ScheduledTask) Stop(ctx context.Context) error { return s.e.Stop(ctx) }

// StepDown hands the lease over as Stop does, and keeps the schedule out of
// the contest for cooldown (H4).
func (s *ScheduledTask) StepDown(ctx context.Context, cooldown time.Duration) error {
	return s.e.StepDown(ctx, cooldown)
}

// runSchedule is the task of a scheduled term: it runs fn as s says until
// the term ends.
func (c *Client) runSchedule(ctx context.Context, t *Term, s Schedule, info *runInfo, fn TaskFunc) error {
	kind := "rate"
	if s.Delay > 0 {
		kind = "delay"
	}
	last, hasLast := decodeRecord(t.eng.value, kind)
	firstAt := time.Now().Add(s.Initial)
	defer info.update(func(st *ScheduleStatus) { st.Next = time.Time{} })
	for {
		// When is the next run due, on the store's clock? storeNow is an
		// estimate from the last renewal, ahead of the store by up to one
		// request latency, so a slot may start slightly before its boundary
		// on the store's clock. That cannot run a slot twice: runs are
		// recorded by slot number, and a slot recorded complete is never
		// started again.
		storeNow, err := c.storeNow(ctx)
		if err != nil {
			return nil // the term ended
		}
		var due time.Time
		var slot int64
		if s.Rate > 0 {
			slot = max(floorDiv(storeNow.UnixMilli(), s.Rate.Milliseconds()), 0)
			if hasLast && slot*s.Rate.Milliseconds() <= last.UnixMilli() {
				slot = floorDiv(last.UnixMilli(), s.Rate.Milliseconds()) + 1
			}
			due = time.UnixMilli(slot * s.Rate.Milliseconds())
		} else {
			due = storeNow
			if hasLast {
				due = last.Add(s.Delay)
			}
		}
		wait := max(time.Until(firstAt), due.Sub(storeNow))
		info.update(func(st *ScheduleStatus) { st.Next = time.Now().Add(wait) })
		if !sleepCtx(ctx, wait) {
			return nil
		}
		if s.Rate > 0 {
			// A slot missed while waiting (the initial delay, a long run) is
			// skipped: run the slot current now.
			if now, err := c.storeNow(ctx); err == nil {
				slot = max(slot, floorDiv(now.UnixMilli(), s.Rate.Milliseconds()))
			}
		}
		// E1: start only if the term stays valid for the step; otherwise try
		// again after the next renewal, within the same slot.
		for t.EnsureValid(s.Step) != nil {
			renewed := c.renewedChan()
			select {
			case <-renewed:
			case <-ctx.Done():
				return nil
			}
			if s.Rate > 0 {
				if now, err := c.storeNow(ctx); err == nil && floorDiv(now.UnixMilli(), s.Rate.Milliseconds()) > slot {
					break // the slot is over; the outer loop picks the next one
				}
			}
		}
		if t.EnsureValid(s.Step) != nil {
			continue
		}
		started := time.Now()
		info.update(func(st *ScheduleStatus) { st.LastRun, st.Next = started, time.Time{}; st.Runs++ })
		runCtx := ctx
		if s.Rate > 0 {
			runCtx = context.WithValue(ctx, slotKey{}, time.UnixMilli(slot*s.Rate.Milliseconds()))
		}
		runErr := protect(func() error { return fn(runCtx, t) })
		took := time.Since(started)
		info.update(func(st *ScheduleStatus) { st.LastErr = runErr })
		var record time.Time
		if s.Rate > 0 {
			record = time.UnixMilli(slot * s.Rate.Milliseconds())
		} else if record, err = c.storeNow(ctx); err != nil {
			return nil
		}
		last, hasLast = record, true // never rerun this slot in this term
		if runErr != nil {
			if ctx.Err() == nil || !errors.Is(runErr, context.Canceled) {
				c.report(Event{Kind: EventRunFailed, Name: t.name, Token: t.token, Err: runErr, Duration: took,
					Group: info.group, Partition: info.part})
			}
			if ctx.Err() != nil {
				return nil
			}
			continue // a failed run is not recorded
		}
		// Reported for the metrics adapters' runs by outcome; nothing
		// below depends on it.
		c.report(Event{Kind: EventRunSucceeded, Name: t.name, Token: t.token, Duration: took,
			Group: info.group, Partition: info.part})
		// Record the slot even if the term was revoked meanwhile: during the
		// hand-off the lease is still ours until this task returns.
		if err := c.putValue(context.WithoutCancel(ctx), t, encodeRecord(kind, record)); err != nil {
			if errors.Is(err, backends.ErrNotHolder) {
				return nil
			}
			c.report(Event{Kind: EventBackendError, Name: t.name, Token: t.token, Err: err})
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

type slotKey struct{}

// ScheduledSlot returns the start, on the store's clock, of the fixed-rate
// slot a run was started for, from the run's context; ok is false outside a
// fixed-rate run. The slot start names the run across nodes and fail-overs,
// so it serves as an idempotency key.
func ScheduledSlot(ctx context.Context) (start time.Time, ok bool) {
	start, ok = ctx.Value(slotKey{}).(time.Time)
	return start, ok
}

// The lease value a schedule records: "simba/v1 rate <unix ms>" or
// "simba/v1 delay <unix ms>".
const recordPrefix = "simba/v1 "

func encodeRecord(kind string, at time.Time) []byte {
	return []byte(recordPrefix + kind + " " + strconv.FormatInt(at.UnixMilli(), 10))
}

func decodeRecord(v []byte, kind string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(string(v), recordPrefix+kind+" ")
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// ScheduleRecord is what a schedule records beside its lease, in the
// lease's value, after each successful run: the record a node elected next
// reads to know what not to run again. Status tools read it from the store
// (backends.LeaseInfo.Value) with [DecodeScheduleValue].
type ScheduleRecord struct {
	// Kind is "rate" for a fixed-rate schedule, "delay" for a fixed-delay
	// one.
	Kind string
	// At is, for "rate", the start of the last slot whose run succeeded;
	// for "delay", when the last successful run ended. Both are on the
	// store's clock, to the millisecond.
	At time.Time
}

// DecodeScheduleValue decodes the value a schedule writes beside its lease
// ("simba/v1 rate <unix ms>" or "simba/v1 delay <unix ms>"). It reports
// false for any other value: a lease that no schedule ran under, or a value
// written by something else. The format is stored, so it is stable across
// versions: a new version reads what an older one wrote.
func DecodeScheduleValue(v []byte) (ScheduleRecord, bool) {
	for _, kind := range [...]string{"rate", "delay"} {
		if at, ok := decodeRecord(v, kind); ok {
			return ScheduleRecord{Kind: kind, At: at}, true
		}
	}
	return ScheduleRecord{}, false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept all of d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// storeNow estimates the store's clock from the last renewal, or reads it.
func (c *Client) storeNow(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	t, ok := c.m.storeNow(c.now())
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	sc, ok := c.backend.(backends.StoreClock)
	if !ok {
		return time.Time{}, errors.New("simba: the backend has no store clock")
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.RenewInterval)
	defer cancel()
	return sc.StoreTime(cctx)
}

// renewedChan returns a channel closed at the next successful renewal.
func (c *Client) renewedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewed
}

// putValue stores value beside t's lease, with t's token.
func (c *Client) putValue(ctx context.Context, t *Term, value []byte) error {
	w := make(chan waitResult, 1)
	c.apply(func(now mono) { c.m.putValue(now, t, value, w) })
	_, err := wait(ctx, w)
	return err
}

func (m *machine) putValue(now mono, t *Term, value []byte, w waiter) {
	m.advance(now)
	defer m.settle()
	// A term being handed over (revoked, its task awaited, not yet
	// released) still holds its lease: its task may record what it
	// finished, fenced by the token in the store.
	c := t.eng.c
	handingOver := c.phase == phHandoff && c.term == t && t.eng.releaseReq == 0
	s, live := m.current(t.eng.sess.gen)
	if !live || t.ended.Load() && !handingOver {
		m.complete(w, nil, fmt.Errorf("simba: %v ended: %w", t, backends.ErrNotHolder))
		return
	}
	m.send(request{kind: reqPutValue, gen: s.gen, name: t.name, token: t.token, value: value, timeout: s.period},
		&pendingReq{w: w})
}
