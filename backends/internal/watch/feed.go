package watch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// A Feed keeps one subscription to a store's release channel and turns what
// arrives into calls of the watches registered with it. It holds the loop
// every backend with a broadcast needs, once: subscribe when the first watch
// is added; reconnect with back-off when the subscription fails; since
// releases published while it was down are lost, wake every watch after each
// reconnection (a hint only: candidates try again, which is always safe);
// when the subscription has been silent for a while, check that it is alive
// — but only while some watch waits, so that an idle feed costs the store
// nothing.
//
// The zero Feed is not usable; make one with [NewFeed].
type Feed struct {
	src    Source
	logger *slog.Logger
	attrs  []any

	watches Registry

	mu      sync.Mutex
	started bool
	closed  bool
	sub     Subscription // the current subscription, nil between attempts
	cancel  context.CancelFunc
	done    chan struct{}
}

// Source is a store's release channel, as a [Feed] uses it.
type Source interface {
	// Subscribe opens a subscription and returns once the store confirmed
	// it. An error wrapping [ErrUnsupported] means the store will never
	// deliver notifications (a pooler that does not pass them on): the feed
	// logs it once and stops trying.
	Subscribe(ctx context.Context) (Subscription, error)
}

// Subscription is one open subscription of a [Source].
type Subscription interface {
	// Receive waits for the next message until ctx ends or timeout passes.
	// It returns ok false and a nil error if nothing arrived in time. A
	// message that is not a release (a pong) has an empty Name.
	Receive(ctx context.Context, timeout time.Duration) (r Release, ok bool, err error)

	// Ping checks that the subscription is alive. It returns answered true
	// if the store answered within the call; otherwise the answer arrives
	// later through Receive, as a message with an empty Name.
	Ping(ctx context.Context) (answered bool, err error)

	// Close ends the subscription; it may be called while Receive runs on
	// another goroutine, and makes it return.
	Close() error
}

// Release is one message of a release channel: lease Name was released, or
// its holder's session ended, by session From ("" if unknown).
type Release struct {
	Name string
	From string
}

// ErrUnsupported is wrapped by a [Source] whose store cannot deliver
// notifications at all.
var ErrUnsupported = errors.New("notifications not supported")

// Feed timing: how long a silent subscription waits before it checks that it
// is alive (while a watch waits), how long it waits for the answer, and the
// back-off between failed attempts.
const (
	pingAfter  = 5 * time.Second
	pongWithin = 2 * time.Second
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// NewFeed returns a feed of src that logs to logger (with attrs, such as the
// backend's namespace) when its subscription is lost or unsupported. It
// starts nothing until the first [Feed.Watch].
func NewFeed(src Source, logger *slog.Logger, attrs ...any) *Feed {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Feed{src: src, logger: logger, attrs: attrs, done: make(chan struct{})}
}

// Watch registers fn for name on behalf of session (whose own releases do
// not call it, see [Registry.FireFrom]) and starts the subscription if it is
// the first watch. After [Feed.Close] it registers nothing. The returned stop
// behaves as [Registry.AddFor]'s.
func (f *Feed) Watch(session, name string, fn func()) (stop func()) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return func() {}
	}
	if !f.started {
		f.started = true
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel = cancel
		go f.loop(ctx)
	}
	f.mu.Unlock()
	return f.watches.AddFor(session, name, fn)
}

// Watching returns the number of names watched.
func (f *Feed) Watching() int { return f.watches.Len() }

// Close ends the subscription and waits for the feed's goroutine. Watches
// are not called afterwards. Closing twice is fine.
func (f *Feed) Close() {
	f.mu.Lock()
	f.closed = true
	started := f.started
	if f.cancel != nil {
		f.cancel()
	}
	if f.sub != nil {
		f.sub.Close() // unblocks a Receive in progress
	}
	f.mu.Unlock()
	if started {
		<-f.done
	}
}

// loop keeps one subscription until ctx ends, reconnecting with back-off.
func (f *Feed) loop(ctx context.Context) {
	defer close(f.done)
	backoff := minBackoff
	subscribed := false // a subscription was confirmed before
	for ctx.Err() == nil {
		confirmed, err := f.run(ctx, subscribed)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrUnsupported) {
			f.logger.Warn("release notifications are not supported here; candidates take over at their next attempt",
				append(f.attrs, slog.Any("err", err))...)
			return
		}
		if confirmed {
			subscribed = true
			backoff = minBackoff
			f.logger.Info("release subscription lost; reconnecting", append(f.attrs, slog.Any("err", err))...)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// run runs one subscription until it fails or ctx ends. It reports whether
// the subscription was confirmed, and why it ended.
func (f *Feed) run(ctx context.Context, resubscribed bool) (confirmed bool, err error) {
	sub, err := f.src.Subscribe(ctx)
	if err != nil {
		return false, err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		sub.Close()
		return false, nil
	}
	f.sub = sub
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.sub = nil
		f.mu.Unlock()
		sub.Close()
	}()
	if resubscribed {
		// Releases published while the subscription was down were lost:
		// every watcher tries again.
		f.watches.FireAll()
	}
	pinged := false
	for {
		timeout := pingAfter
		if pinged {
			timeout = pongWithin
		}
		r, ok, err := sub.Receive(ctx, timeout)
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case err != nil:
			return true, err
		case ok:
			pinged = false
			if r.Name != "" {
				f.watches.FireFrom(r.From, r.Name)
			}
		case pinged:
			return true, errors.New("no answer to a ping")
		case f.watches.Len() == 0:
			// Nobody waits: a dead subscription costs nothing yet, and the
			// next watch's candidate tries on its own schedule anyway.
		default:
			answered, err := sub.Ping(ctx)
			if err != nil {
				return true, err
			}
			pinged = !answered
		}
	}
}
