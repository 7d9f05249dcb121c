package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
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
		if strings.HasPrefix(m.Payload, " ") {
			return told(m.Payload), true, nil
		}
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

// told decodes a change of a followed lease's holder (lua/lib/tell.lua):
// " g <token> <remaining µs> <session> <name> <identity>" for a grant,
// " e <token> <name>" for the end of a term. Anything else is ignored (a
// release with an empty Name).
func told(payload string) watch.Release {
	f := strings.SplitN(payload[1:], " ", 6)
	tok, err := strconv.ParseInt(f[min(1, len(f)-1)], 10, 64)
	switch {
	case err != nil:
	case f[0] == "g" && len(f) == 6:
		us, _ := strconv.ParseInt(f[2], 10, 64)
		return watch.Release{Name: f[4], Change: &backends.Holder{Session: backends.SessionID(f[3]), Identity: f[5],
			Token: backends.Token(tok), Remaining: max(0, time.Duration(us)*time.Microsecond)}}
	case f[0] == "e" && len(f) == 3:
		return watch.Release{Name: f[2], Change: &backends.Holder{Token: backends.Token(tok)}}
	}
	return watch.Release{}
}

// Watch markers (lua/follow.lua): a backend whose sessions watch holders
// marks the names in Redis for followTTL, renewed every followEvery by the
// backend's watch.Feed; a backend that stopped, or crashed, stops costing
// the grants and releases of those names a PUBLISH when its markers expire.
// followBatch bounds the names one call marks.
const (
	followTTL   = 30 * time.Second
	followEvery = followTTL / 3
	followBatch = 100
)

// followHolders is the backend's watch.FollowFunc: it marks names as
// followed by this backend and reads their holders, in calls of followBatch
// names.
func (b *Backend) followHolders(ctx context.Context, names []string) (map[string]backends.Holder, error) {
	out := make(map[string]backends.Holder, len(names))
	for len(names) > 0 {
		batch := names[:min(len(names), followBatch)]
		names = names[len(batch):]
		args := make([]any, 0, 2+len(batch))
		args = append(args, b.node, strconv.FormatInt(micros(followTTL), 10))
		for _, n := range batch {
			args = append(args, n)
		}
		r, err := b.run(ctx, scriptFollow, "follow holders", "", args...)
		if err != nil {
			return nil, err
		}
		if r.status() != "OK" || len(r) != 1+len(batch) {
			return nil, fmt.Errorf("simbaredis: follow holders: unexpected reply %v: %w", []any(r), backends.ErrUnavailable)
		}
		for i, n := range batch {
			h := reply(r.list(1 + i))
			if sid := h.str(0); sid != "" {
				out[n] = backends.Holder{Session: backends.SessionID(sid), Token: backends.Token(h.int(1)),
					Remaining: time.Duration(h.int(2)) * time.Microsecond, Identity: h.str(3)}
			} else {
				out[n] = backends.Holder{Token: backends.Token(h.int(1))}
			}
		}
	}
	return out, nil
}

var _ backends.HolderNotifier = (*session)(nil)

// WatchHolder calls fn with each change of name's holder, in Redis's order
// (backends.HolderNotifier): every grant and every end of a term (a
// release, a close, an expiry the reapers end) of a name that a session of
// this backend watches is published on the backend's channel, short holds
// included. The backend marks the name in Redis for that (lua/follow.lua),
// and reads its holder once the mark is in place — and again after each
// reconnection of its subscription, when messages may have been lost —
// telling it if it is newer than what fn was told; fn is never told a
// change older than one it was told. fn runs on the backend's goroutines
// and must return quickly; calls of one watch never overlap. The returned
// stop waits for a call of fn in progress, so fn must not call its own
// stop. The package documentation describes the cost.
func (s *session) WatchHolder(name string, fn func(backends.Holder)) (stop func()) {
	return s.b.feed.WatchHolder(name, fn)
}
