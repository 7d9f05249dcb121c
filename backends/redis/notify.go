package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends/internal/watch"
)

// releases is the backend's own wake channel ({p}:w:<node>) as a
// watch.Source: one subscription per (re)connection, kept by the backend's
// watch.Feed. A release publishes there only if a session of this backend
// was refused the lease since (luaWake).
type releases struct{ b *Backend }

func (r releases) Subscribe(ctx context.Context) (watch.Subscription, error) {
	ps := r.b.client.Subscribe(ctx, r.b.keys.wake(r.b.node))
	// The confirmation comes first; wait for it, so that releases published
	// from now on are received.
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			ps.Close()
			return nil, fmt.Errorf("simbaredis: subscribe %s: %w", r.b.keys.wake(r.b.node), err)
		}
		if s, ok := msg.(*redis.Subscription); ok && s.Kind == "subscribe" {
			return subscription{ps}, nil
		}
	}
}

// subscription is one go-redis subscription to the release channel.
type subscription struct{ ps *redis.PubSub }

func (s subscription) Receive(ctx context.Context, timeout time.Duration) (watch.Release, bool, error) {
	msg, err := s.ps.ReceiveTimeout(ctx, timeout)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
			return watch.Release{}, false, nil
		}
		return watch.Release{}, false, err
	}
	if m, ok := msg.(*redis.Message); ok {
		// "name session" (see keys.go): the session that released name.
		name, from, _ := strings.Cut(m.Payload, " ")
		return watch.Release{Name: name, From: from}, true, nil
	}
	return watch.Release{}, true, nil // a pong, or a subscription message
}

// Ping sends a PING on the subscription's connection; the pong arrives
// through Receive.
func (s subscription) Ping(ctx context.Context) (bool, error) { return false, s.ps.Ping(ctx) }

func (s subscription) Close() error { return s.ps.Close() }

// Watch calls fn each time name may have become free: a release, a close or
// a reaped expiry of its holder's session published on the namespace's
// channel, unless the holder was this session (it knows what it released),
// and — since releases published meanwhile are lost — every time the
// backend's subscription (re)connects. fn runs on the backend's subscription
// goroutine and must return quickly; calls of one watch never overlap. The
// returned stop waits for a call of fn in progress, so fn must not call its
// own stop. The package documentation describes the subscription.
func (s *session) Watch(name string, fn func()) (stop func()) {
	return s.b.feed.Watch(s.id, name, fn)
}
