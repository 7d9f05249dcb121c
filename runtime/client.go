package runtime

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/simba-go/simba/backends"
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
	cfg      Config // with its defaults applied
	identity string
	d        *driver // the engine's driver: the core, the goroutines, the timer (driver.go)
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
// A nil Observer, or an interface holding a nil pointer, is none.
func WithObserver(ob Observer) Option { return func(o *options) { o.observer = ob } }

// WithCallbackExecutor sets how listener callbacks get a goroutine: exec must
// arrange for f to run, or return an error if it cannot (a bounded pool that
// is full). It must not block. The default starts a goroutine. Callbacks of
// one election still run one at a time, in order (L2); if exec refuses
// an elected callback, the term is given up without callbacks (L6); a
// refused revoked callback runs on a goroutine of the client's (L1).
//
// A direct executor, func(f func()) error { f(); return nil }, runs each
// callback on the client's goroutine that produced it, never under the
// client's lock: its callbacks may call the client, and must return
// quickly, since the client's other work on that goroutine (a renewal, a
// timer) waits for them.
func WithCallbackExecutor(exec func(f func()) error) Option {
	return func(o *options) { o.exec = exec }
}

// WithIdentity sets the identity the client records with its session, for
// people: other clients see it as the holder of this client's leases
// ([Client.Holder]), and status tools show it. It need not be unique. The
// default is [DefaultIdentity]. It must pass backends.ValidateIdentity (at
// most 256 bytes of printable UTF-8); NewClient rejects it otherwise.
func WithIdentity(id string) Option { return func(o *options) { o.identity, o.identitySet = id, true } }

// DefaultIdentity returns the identity of a client made without
// [WithIdentity]: the host name and the process id, "host/4242".
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
}

// NewClient validates cfg (the zero Config means [DefaultConfig]) and starts a
// client on b: it opens a session in the background and keeps it alive. Use
// [Client.Ready] to wait until the session is open.
func NewClient(b backends.Backend, cfg Config, opts ...Option) (*Client, error) {
	if isNil(b) {
		return nil, fmt.Errorf("simba: NewClient: nil backend (%T): %w", b, ErrNilArgument)
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
	if isNil(o.observer) {
		o.observer = nil // a typed nil, as a nil option, is none: each event would panic in it
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
	c := &Client{cfg: vocab.WithDefaults(cfg), identity: o.identity}
	c.d = newDriver(driverConfig{backend: b, cfg: vocab.Effective(c.cfg), seed: o.seed, identity: o.identity,
		logger: o.logger, observer: o.observer, exec: o.exec})
	return c, nil
}

// Config returns the client's configuration, with defaults applied.
func (c *Client) Config() Config { return c.cfg }

// Identity returns the identity the client records with its session.
func (c *Client) Identity() string { return c.identity }

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
	if err := checkContext("close", ctx); err != nil {
		return err
	}
	if err := c.d.close(ctx); err != nil {
		return fmt.Errorf("simba: close: %w", err)
	}
	return nil
}

// Ready waits until the client has a live session, and returns nil; or until
// ctx ends, and returns an error that includes the backend's last error.
func (c *Client) Ready(ctx context.Context) error {
	if err := checkContext("ready", ctx); err != nil {
		return err
	}
	last, err := c.d.awaitLive(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrClosed):
		return fmt.Errorf("simba: ready: %w", err)
	case last != nil:
		return fmt.Errorf("simba: no live session: %w (last backend error: %v)", err, last)
	}
	return fmt.Errorf("simba: no live session: %w", err)
}
