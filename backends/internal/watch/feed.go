package watch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
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
	holders Holders
	follow  FollowFunc    // nil: the store cannot tell holders
	every   time.Duration // how often follow runs for every watched name

	mu      sync.Mutex
	started bool
	subGen  uint64        // confirmed subscriptions so far
	subbed  chan struct{} // signalled after each confirmed subscription
	fdone   chan struct{} // closed when the follower ends; nil if none started
	closed  bool
	sub     Subscription // the current subscription, nil between attempts
	ctx     context.Context
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
// its holder's session ended, by session From ("" if unknown). A message
// that tells a change of Name's holder (see [Holders.Tell]) has Change set;
// it wakes no release watch unless Wake is set too.
type Release struct {
	Name   string
	From   string
	Change *backends.Holder
	Wake   bool // a Change that is also a release hint (a store that sends one message for both)
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
	return &Feed{src: src, logger: logger, attrs: attrs, done: make(chan struct{}), subbed: make(chan struct{}, 1)}
}

// FollowFunc makes a store tell the changes of the holders of names on the
// feed's subscription from now on (a watch marker, a lock), and returns the
// holders it read once that is in place: the changes made before may have
// been lost. A free lease is returned as a Holder with no Session and the
// token of its last term (or one at least as large, such as the last token
// issued by the store), so that watches drop older messages that arrive
// after the read. The feed calls it for new names, for every name after each
// (re)subscription, and every period given to [Feed.Follow].
type FollowFunc func(ctx context.Context, names []string) (map[string]backends.Holder, error)

// Follow makes the feed support [Feed.WatchHolder], with fn run for every
// watched name every period (to renew watch markers that expire, and to
// catch up with anything lost). Call it before the first watch.
func (f *Feed) Follow(fn FollowFunc, every time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follow, f.every = fn, every
}

// WatchHolder registers fn for the changes of name's holder (see
// [Holders]) and starts the subscription and the follower if they are not
// running. Without [Feed.Follow], or after [Feed.Close], it registers
// nothing.
func (f *Feed) WatchHolder(name string, fn func(backends.Holder)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	f.mu.Lock()
	if f.closed || f.follow == nil {
		f.mu.Unlock()
		return func() {}
	}
	f.startLocked()
	if f.fdone == nil {
		f.fdone = make(chan struct{})
		go f.follower(f.ctx)
	}
	f.mu.Unlock()
	return f.holders.Add(name, fn)
}

// HolderWatched reports whether name's holder is watched.
func (f *Feed) HolderWatched(name string) bool { return f.holders.Watched(name) }

// WatchingHolders returns the number of names whose holders are watched.
func (f *Feed) WatchingHolders() int { return f.holders.Len() }

// startLocked starts the subscription's goroutine, once. Called with mu held.
func (f *Feed) startLocked() {
	if !f.started {
		f.started = true
		f.ctx, f.cancel = context.WithCancel(context.Background())
		go f.loop(f.ctx)
	}
}

// follower runs the FollowFunc: for names newly watched, for every name
// after each confirmed subscription, and every period; it tells the
// holders read. It waits for a subscription first: changes the store told
// before it would be lost.
func (f *Feed) follower(ctx context.Context) {
	defer close(f.fdone)
	var (
		gen      uint64              // the subscription the names below were followed on
		followed = map[string]bool{} // names followed on it
		backoff  = minBackoff
	)
	t := time.NewTimer(f.every)
	defer t.Stop()
	for {
		f.mu.Lock()
		cur := f.subGen
		f.mu.Unlock()
		var names []string
		all := false
		if cur != 0 {
			if cur != gen {
				gen, followed, all = cur, map[string]bool{}, true
			}
			for _, n := range f.holders.Names() {
				if all || !followed[n] {
					names = append(names, n)
				}
			}
		}
		wait := f.every
		if len(names) > 0 {
			cctx, cancel := context.WithTimeout(ctx, pongWithin)
			read, err := f.follow(cctx, names)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				f.logger.Debug("following lease holders failed; trying again", append(f.attrs, slog.Any("err", err))...)
				if all {
					gen = 0 // follow every name again
				}
				wait, backoff = backoff, min(2*backoff, maxBackoff)
			} else {
				backoff = minBackoff
				for _, n := range names {
					followed[n] = true
					if h, ok := read[n]; ok {
						f.holders.Tell(n, h)
					}
				}
			}
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-f.holders.Changed():
		case <-f.subbed:
		case <-t.C:
			gen = 0 // the period: follow every name again
		}
	}
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
	f.startLocked()
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
	fdone := f.fdone
	f.mu.Unlock()
	if started {
		<-f.done
	}
	if fdone != nil {
		<-fdone
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
	f.subGen++
	f.mu.Unlock()
	select {
	case f.subbed <- struct{}{}: // the follower follows every name on it
	default:
	}
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
			if r.Name != "" && r.Change != nil {
				f.holders.Tell(r.Name, *r.Change)
			}
			if r.Name != "" && (r.Change == nil || r.Wake) {
				f.watches.FireFrom(r.From, r.Name)
			}
		case pinged:
			return true, errors.New("no answer to a ping")
		case f.watches.Len() == 0 && f.holders.Len() == 0:
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
