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
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Client is one node's connection to a backend: one session, renewed in the
// background, and every election and lock this node runs on it (S1). A
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

	mu sync.Mutex
	m  *engine.Machine // the engine's core; every call under mu
	registry
	timer    *time.Timer
	live     chan struct{} // closed while the session is live
	renewed  chan struct{} // closed at the next successful renewal
	shutdown bool
	quit     chan struct{} // closed when the machine has closed

	notes         notes
	holderWatches holderWatches
	events        *serialQueue
	dones         callbackDones
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
// one election still run one at a time, in order (L2); if exec refuses
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
		cfg:      vocab.WithDefaults(cfg),
		logger:   o.logger,
		observer: o.observer,
		exec:     o.exec,
		identity: o.identity,
		epoch:    time.Now(),
		registry: newRegistry(),
		live:     make(chan struct{}),
		renewed:  make(chan struct{}),
		quit:     make(chan struct{}),
		events:   newSerialQueue(nil),
	}
	c.notes.signal = make(chan struct{}, 1)
	c.m = engine.New(vocab.Effective(c.cfg), o.seed)
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	c.wg.Add(1)
	go c.loop()
	c.apply(c.m.Tick)
	return c, nil
}

// Config returns the client's configuration, with defaults applied.
func (c *Client) Config() Config { return c.cfg }

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

// waitReuse is wait for a waiter's channel that nothing else holds: once
// its one result has been received, the channel is kept for the next
// waiter (a channel of a pointer type costs two allocations).
func (c *Client) waitReuse(ctx context.Context, w chan waitResult) (waitResult, error) {
	select {
	case r := <-w:
		c.reuseWaiter(w)
		return r, r.err
	case <-ctx.Done():
		return waitResult{}, ctx.Err()
	}
}

// reuseWaiter keeps w, received from, for a later waiter.
func (c *Client) reuseWaiter(w chan waitResult) {
	c.mu.Lock()
	if len(c.freeWaits) < cap(c.freeWaits) {
		c.freeWaits = append(c.freeWaits, w)
	}
	c.mu.Unlock()
}

// await steps an input that completes a waiter, and waits for it or for
// ctx. Called with a context the engine gave a callback or task, it steps
// the input without a waiter and returns nil at once: waiting there could
// wait for the caller itself (L5).
func (c *Client) await(ctx context.Context, input func(w engine.Waiter) engine.Input) error {
	if c.inside(ctx) {
		c.step(input(0))
		return nil
	}
	var ch chan waitResult
	c.apply(func(now mono) {
		var w engine.Waiter
		w, ch = c.newWaiter()
		c.m.Step(now, input(w))
	})
	_, err := c.waitReuse(ctx, ch)
	return err
}

// insideKey marks the contexts the engine passes to callbacks and tasks, so
// that a Stop, StepDown or Close called with them does not wait for itself
// (L5).
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
//
// A client leading more than 256 leases outside partition groups, with no
// task or scheduled run in progress, hands them over in bulk: it revokes
// every term and lets the session's close release them all at once, rather
// than one release each; each revoked callback still follows the release.
func (c *Client) Close(ctx context.Context) error {
	if err := c.await(ctx, func(w engine.Waiter) engine.Input { return engine.Close{Waiter: w} }); err != nil {
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
	state, closing, _ := c.m.State()
	live, closed := c.live, state == SessionClosed || closing
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("simba: ready: %w", ErrClosed)
	}
	select {
	case <-live:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		_, _, last := c.m.State()
		c.mu.Unlock()
		if last != nil {
			return fmt.Errorf("simba: no live session: %w (last backend error: %v)", ctx.Err(), last)
		}
		return fmt.Errorf("simba: no live session: %w", ctx.Err())
	}
}
