package simbaredis

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends/internal/watch"
)

// notifier is a Backend's one subscription to its release channel, started
// by the first Watch and ended by Backend.Close, and the watches it feeds.
type notifier struct {
	b *Backend

	watches watch.Registry

	mu      sync.Mutex
	started bool
	closed  bool
	pubsub  *redis.PubSub // the current subscription, nil between attempts
	cancel  context.CancelFunc
	done    chan struct{}

	subscribed bool // a subscription was confirmed before (loop's own)
}

// Subscription timing: how long a silent subscription waits before it pings,
// how long it waits for the pong before it reconnects, and the back-off
// between failed attempts.
const (
	pingAfter  = 5 * time.Second
	pongWithin = 2 * time.Second
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

func (n *notifier) init(b *Backend) {
	n.b = b
	n.done = make(chan struct{})
}

func (n *notifier) watch(session, name string, fn func()) (stop func()) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return func() {}
	}
	if !n.started {
		n.started = true
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel = cancel
		go n.loop(ctx)
	}
	n.mu.Unlock()
	return n.watches.AddFor(session, name, fn)
}

// close ends the subscription and waits for its goroutine.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	started := n.started
	if n.cancel != nil {
		n.cancel()
	}
	if n.pubsub != nil {
		n.pubsub.Close() // unblocks a Receive in progress
	}
	n.mu.Unlock()
	if started {
		<-n.done
	}
}

// loop keeps one subscription to the release channel until ctx ends,
// reconnecting with back-off. Every (re)subscription wakes every watch,
// since releases published while it was down were lost.
func (n *notifier) loop(ctx context.Context) {
	defer close(n.done)
	backoff := minBackoff
	for ctx.Err() == nil {
		if n.subscribe(ctx) {
			backoff = minBackoff
		}
		if ctx.Err() != nil {
			return
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

// subscribe runs one subscription until it fails or ctx ends. It reports
// whether it got as far as a confirmed subscription.
func (n *notifier) subscribe(ctx context.Context) (confirmed bool) {
	ps := n.b.client.Subscribe(ctx, n.b.keys.channel())
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		ps.Close()
		return false
	}
	n.pubsub = ps
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.pubsub = nil
		n.mu.Unlock()
		ps.Close()
	}()
	pinged := false
	for {
		timeout := pingAfter
		if pinged {
			timeout = pongWithin
		}
		msg, err := ps.ReceiveTimeout(ctx, timeout)
		if ctx.Err() != nil {
			return confirmed
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				if err := ps.Ping(ctx); err == nil {
					pinged = true
					continue
				}
			}
			if confirmed {
				n.b.logger.Info("simbaredis: release subscription lost; reconnecting",
					slog.String("prefix", n.b.prefix), slog.Any("err", err))
			}
			return confirmed
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				confirmed = true
				if n.subscribed {
					// Releases published while the subscription was down
					// were lost: every watcher tries again (a hint only).
					n.watches.FireAll()
				}
				n.subscribed = true
			}
		case *redis.Message:
			// "name session" (see keys.go): the session that released
			// name does not wake its own watches.
			name, from, _ := strings.Cut(m.Payload, " ")
			n.watches.FireFrom(from, name)
		}
	}
}
