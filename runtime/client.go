package runtime

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
)

// Client is one node's connection to a backend: one session, renewed in the
// background, and every election and lock this node runs on it (SPEC S1). A
// process may hold several clients; each acts as a separate node.
//
// A Client is safe for concurrent use. Create it with [NewClient] and end it
// with [Client.Close], which hands over everything it holds. The backend
// passed to NewClient stays the caller's: Close does not close it.
type Client struct {
	backend  backends.Backend
	cfg      Config
	logger   *slog.Logger
	observer Observer
	exec     func(func()) error
	identity string
	epoch    time.Time

	mu       sync.Mutex
	m        *machine
	sessions map[uint64]backends.Session
	watches  map[uint64]map[string]func() // session gen → name → stop
	timer    *time.Timer
	live     chan struct{} // closed while the session is live
	renewed  chan struct{} // closed at the next successful renewal
	shutdown bool
	quit     chan struct{} // closed when the machine has closed

	notes         notes
	holderWatches holderWatches
	events        *serialQueue
	wg            sync.WaitGroup // our goroutines: the loop, backend calls, callbacks, events
}

// Option configures a Client.
type Option func(*options)

type options struct {
	logger   *slog.Logger
	observer Observer
	exec     func(func()) error
	seed     uint64
	seeded   bool

	identity    string
	identitySet bool
}

// WithLogger sets the logger for the client's structured logs. The default
// discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithObserver sets a hook that receives the engine's events, for metrics.
func WithObserver(ob Observer) Option { return func(o *options) { o.observer = ob } }

// WithCallbackExecutor sets how listener callbacks get a goroutine: exec must
// arrange for f to run, or return an error if it cannot (a bounded pool that
// is full). It must not block. The default starts a goroutine. Callbacks of
// one election still run one at a time, in order (SPEC L2); if exec refuses
// an elected callback, the term is given up without callbacks (L6); a
// refused revoked callback runs on a goroutine of the client's (L1).
func WithCallbackExecutor(exec func(f func()) error) Option {
	return func(o *options) { o.exec = exec }
}

// NewClient validates cfg (the zero Config means [DefaultConfig]) and starts a
// client on b: it opens a session in the background and keeps it alive. Use
// [Client.Ready] to wait until the session is open.
func NewClient(b backends.Backend, cfg Config, opts ...Option) (*Client, error) {
	if b == nil {
		return nil, errors.New("simba: NewClient: nil backend")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		if opt != nil { // as with a nil io.Writer, a nil option is none
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if !o.identitySet {
		o.identity = DefaultIdentity()
	}
	if err := backends.ValidateIdentity(o.identity); err != nil {
		return nil, fmt.Errorf("simba: NewClient: WithIdentity: %w", err)
	}
	if !o.seeded {
		var b [8]byte
		_, _ = crand.Read(b[:])
		o.seed = binary.LittleEndian.Uint64(b[:])
	}
	c := &Client{
		backend:  b,
		cfg:      cfg.withDefaults(),
		logger:   o.logger,
		observer: o.observer,
		exec:     o.exec,
		identity: o.identity,
		epoch:    time.Now(),
		sessions: make(map[uint64]backends.Session),
		watches:  make(map[uint64]map[string]func()),
		live:     make(chan struct{}),
		renewed:  make(chan struct{}),
		quit:     make(chan struct{}),
		events:   newSerialQueue(nil),
	}
	c.notes.signal = make(chan struct{}, 1)
	c.m = newMachine(c.cfg.effective(), o.seed, c.now, c)
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	c.wg.Add(1)
	go c.loop()
	c.apply(c.m.tick)
	return c, nil
}

// Config returns the client's configuration, with defaults applied.
func (c *Client) Config() Config { return c.cfg }

func (c *Client) now() mono { return time.Since(c.epoch) }

// apply runs one input of the state machine under the client's mutex and
// performs the effects it produced.
func (c *Client) apply(input func(now mono)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	input(c.now())
	c.flush()
}

func (c *Client) flush() {
	for {
		effs := c.m.takeEffects()
		if len(effs) == 0 {
			break
		}
		for i := range effs {
			c.perform(&effs[i])
		}
	}
	if c.shutdown {
		return
	}
	if at, ok := c.m.nextWake(); ok {
		c.timer.Reset(max(0, at-c.now()))
	} else {
		c.timer.Stop()
	}
	isLive := c.m.state == SessionLive || c.m.state == SessionSuspended
	select {
	case <-c.live:
		if !isLive {
			c.live = make(chan struct{})
		}
	default:
		if isLive {
			close(c.live)
		}
	}
}

// perform carries out one effect. It runs under c.mu and never blocks.
func (c *Client) perform(e *effect) {
	if c.shutdown && e.kind != effComplete {
		if e.kind == effEvent {
			logEvent(c.logger, e.ev) // too late for the observer queue
		}
		return
	}
	switch e.kind {
	case effSend:
		s := c.sessions[e.req.gen]
		if s == nil && e.req.kind != reqOpen {
			c.m.done(c.now(), e.req.id, result{err: fmt.Errorf("simba: %v: no session handle: %w",
				e.req.kind, backends.ErrSessionExpired)})
			return
		}
		c.wg.Add(1)
		go c.call(e.req, s)
	case effDispatch:
		c.dispatch(e.c, e.term, e.elected)
	case effStartTask:
		ct, t := e.c, e.term
		go func() {
			ctx := context.WithValue(t.ctx, insideKey{}, c)
			err := protect(func() error { return ct.task(ctx, t) })
			c.apply(func(now mono) { c.m.taskDone(now, t, err) })
		}()
	case effEvent:
		ev := e.ev
		if ev.Kind == EventSessionRenewed || ev.Kind == EventSessionOpened {
			close(c.renewed)
			c.renewed = make(chan struct{})
		}
		c.wg.Add(1)
		c.events.push(queued{run: func() { defer c.wg.Done(); c.deliver(ev) }, mustRun: true})
	case effComplete:
		e.w.(chan waitResult) <- waitResult{term: e.term, err: e.err}
	case effWatch:
		n, ok := c.sessions[e.req.gen].(backends.Notifier)
		if !ok {
			return
		}
		byName := c.watches[e.req.gen]
		if byName == nil {
			byName = make(map[string]func())
			c.watches[e.req.gen] = byName
		}
		if _, dup := byName[e.req.name]; !dup {
			gen, name := e.req.gen, e.req.name
			byName[name] = n.Watch(name, func() { c.notes.add(gen, name) })
		}
	case effUnwatch:
		if stop := c.watches[e.req.gen][e.req.name]; stop != nil {
			stop()
			delete(c.watches[e.req.gen], e.req.name)
		}
	case effShutdown:
		c.shutdown = true
		c.timer.Stop()
		close(c.quit)
	}
}

// call performs one backend request on a goroutine of its own and feeds the
// reply back to the machine.
func (c *Client) call(req request, s backends.Session) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), req.timeout)
	defer cancel()
	var res result
	var opened backends.Session
	switch req.kind {
	case reqOpen:
		opened, res.renewal, res.err = c.backend.OpenSession(ctx, backends.SessionOptions{TTL: req.ttl, Identity: c.identity})
		if res.err == nil {
			res.session = opened.ID()
		}
	case reqKeepAlive:
		res.renewal, res.err = s.KeepAlive(ctx)
	case reqOwned:
		res.held, res.digest, res.err = s.Owned(ctx)
	case reqAcquire:
		res.grant, res.err = s.Acquire(ctx, req.name)
	case reqRelease:
		res.digest, res.err = s.Release(ctx, req.name, req.token)
	case reqClose:
		res.err = s.Close(ctx)
	case reqPutValue:
		res.err = s.PutValue(ctx, req.name, req.token, req.value)
	case reqJoin:
		res.err = s.Join(ctx, req.group, req.n)
	case reqLeave:
		res.err = s.Leave(ctx, req.group)
	case reqMembers:
		res.view, res.err = s.Members(ctx, req.group)
	}
	c.apply(func(now mono) {
		switch {
		case opened != nil:
			c.sessions[req.gen] = opened
		case req.kind == reqClose:
			for _, stop := range c.watches[req.gen] {
				stop()
			}
			delete(c.watches, req.gen)
			delete(c.sessions, req.gen)
		}
		c.m.done(now, req.id, res)
	})
}

// deliver hands an event to the log and the observer, on the event queue.
func (c *Client) deliver(e Event) {
	logEvent(c.logger, e)
	if e.Kind == EventElected || e.Kind == EventRevoked {
		c.holderWatches.wake(e.Name)
	}
	if c.observer == nil {
		return
	}
	if err := protect(func() error { c.observer.Observe(e); return nil }); err != nil {
		logEvent(c.logger, Event{Kind: EventCallbackPanicked, Name: e.Name, Err: err})
	}
}

// loop turns timer ticks and release notifications into machine inputs.
func (c *Client) loop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.timer.C:
			c.apply(c.m.tick)
		case <-c.notes.signal:
			for _, n := range c.notes.take() {
				c.apply(func(now mono) { c.m.notified(now, n.gen, n.name) })
			}
		case <-c.quit:
			return
		}
	}
}

// notes collects release notifications from backends without blocking them.
type notes struct {
	mu      sync.Mutex
	pending map[note]struct{}
	signal  chan struct{}
}

type note struct {
	gen  uint64
	name string
}

func (n *notes) add(gen uint64, name string) {
	n.mu.Lock()
	if n.pending == nil {
		n.pending = make(map[note]struct{})
	}
	n.pending[note{gen, name}] = struct{}{}
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *notes) take() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]note, 0, len(n.pending))
	for k := range n.pending {
		out = append(out, k)
	}
	clear(n.pending)
	return out
}

type waitResult struct {
	term *Term
	err  error
}

// wait waits for w, or for ctx.
func wait(ctx context.Context, w chan waitResult) (waitResult, error) {
	select {
	case r := <-w:
		return r, r.err
	case <-ctx.Done():
		return waitResult{}, ctx.Err()
	}
}

// await applies an input that completes a waiter, and waits for it or for
// ctx. Called with a context the engine gave a callback or task, it applies
// the input without a waiter and returns nil at once: waiting there could
// wait for the caller itself (SPEC L5).
func (c *Client) await(ctx context.Context, input func(now mono, w waiter)) error {
	if c.inside(ctx) {
		c.apply(func(now mono) { input(now, nil) })
		return nil
	}
	w := make(chan waitResult, 1)
	c.apply(func(now mono) { input(now, w) })
	_, err := wait(ctx, w)
	return err
}

// insideKey marks the contexts the engine passes to callbacks and tasks, so
// that a Stop, StepDown or Close called with them does not wait for itself
// (SPEC L5).
type insideKey struct{}

func (c *Client) inside(ctx context.Context) bool {
	return ctx != nil && ctx.Value(insideKey{}) == c
}

// Close stops every election, lock, schedule and group of the client with
// the hand-off order (in that order), closes the session so that the backend
// releases everything at once (S4, H1), and waits until every goroutine
// of the client has ended. ctx bounds only the wait: the hand-off goes on
// after ctx ends. Called from inside a callback or task (with the context it
// was given), Close starts closing and returns nil at once (L5). Closing a
// closed client returns nil.
//
// A task that ignores its cancellation is waited for only until its term's
// validity runs out (H2); after that it is the caller's.
func (c *Client) Close(ctx context.Context) error {
	if err := c.await(ctx, c.m.close); err != nil {
		return fmt.Errorf("simba: close: %w", err)
	}
	if c.inside(ctx) {
		return nil // closing goes on; waiting for our goroutines would wait for the caller
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("simba: close: %w", ctx.Err())
	}
}

// Ready waits until the client has a live session, and returns nil; or until
// ctx ends, and returns an error that includes the backend's last error.
func (c *Client) Ready(ctx context.Context) error {
	c.mu.Lock()
	live, closed := c.live, c.m.state == SessionClosed || c.m.closing != nil
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("simba: ready: %w", ErrClosed)
	}
	select {
	case <-live:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		last := c.m.lastErr
		c.mu.Unlock()
		if last != nil {
			return fmt.Errorf("simba: no live session: %w (last backend error: %v)", ctx.Err(), last)
		}
		return fmt.Errorf("simba: no live session: %w", ctx.Err())
	}
}
