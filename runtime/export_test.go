package runtime

import "github.com/simba-go/simba/runtime/internal/fairtest"

// WithSeed fixes the seed of the candidates' retry jitter, for reproducible
// tests. Clients otherwise take a random seed.
func WithSeed(seed uint64) Option { return func(o *options) { o.seed, o.seeded = seed, true } }

// PauseEngine stops the driver's timer. While no backend reply, task or
// callback completion and no release notification arrives (freeze the
// node's link first and wait for the bubble), no goroutine of the engine
// runs, however much virtual time passes: the node is paused (T3).
// ResumeEngine ends the pause with a tick at the current time.
func (c *Client) PauseEngine() {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.timer.Stop()
}

// ResumeEngine ticks the engine, which re-arms its timer.
func (c *Client) ResumeEngine() { c.d.apply(c.d.m.Tick) }

// MinMoves exposes the tests' independent oracle for the fewest moves to a
// fair assignment to the external test package.
var MinMoves = fairtest.MinMoves

// HoldEngine takes the driver's mutex, as an engine step that does not end
// would, until the returned function is called: no input is applied
// meanwhile, neither on the engine's goroutine nor on a caller's.
func (c *Client) HoldEngine() (release func()) {
	c.d.mu.Lock()
	return c.d.mu.Unlock
}

// MaxLeaseCalls is how many lease calls run at once (maxLeaseCalls).
const MaxLeaseCalls = maxLeaseCalls

// EventsIdle reports whether no event waits for delivery and no goroutine
// delivers events.
func (c *Client) EventsIdle() bool {
	q := c.d.events
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.running && len(q.items) == 0
}
