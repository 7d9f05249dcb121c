package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
)

// Holder describes who holds a lease, as [Client.Holder] and
// [Client.WatchHolder] report it. The zero Holder (with a Name) means the
// lease is free.
type Holder struct {
	Name     string             // the lease name
	Session  backends.SessionID // the holding session, "" if the lease is free
	Identity string             // the holder's identity (see WithIdentity), "" if it gave none
	Token    Token              // the holder's fencing token
	Self     bool               // the holder is this client's current session
}

// Free reports whether the lease is free.
func (h Holder) Free() bool { return h.Session == "" }

// String describes the holder in a few words: "report: free", or
// "report: held by node-2 (session 3fa0…), token 17".
func (h Holder) String() string {
	if h.Free() {
		return h.Name + ": free"
	}
	who := string(h.Session)
	if h.Identity != "" {
		who = h.Identity + " (session " + who + ")"
	}
	if h.Self {
		who += ", this client"
	}
	return h.Name + ": held by " + who + ", token " + strconv.FormatInt(int64(h.Token), 10)
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

// Identity returns the identity the client records with its session.
func (c *Client) Identity() string { return c.identity }

// Holder reads who holds the lease name now, from the store, whether or not
// this client contends for it. It waits for the client's session to be live
// (a read is made through it), and makes one call to the store, bounded by
// the renewal period as every backend call is. A lease whose holder's
// session expired reads as free.
func (c *Client) Holder(ctx context.Context, name string) (Holder, error) {
	if err := backends.ValidateName(name); err != nil {
		return Holder{}, fmt.Errorf("simba: holder: %w", err)
	}
	for {
		s, id, period, live, err := c.currentSession()
		if err != nil {
			return Holder{}, fmt.Errorf("simba: holder of %q: %w", name, err)
		}
		if s == nil {
			select {
			case <-live:
				continue
			case <-ctx.Done():
				return Holder{}, fmt.Errorf("simba: holder of %q: no live session: %w", name, ctx.Err())
			}
		}
		callCtx, cancel := context.WithTimeout(ctx, period)
		h, err := s.Holder(callCtx, name)
		cancel()
		switch {
		case err == nil:
			return Holder{Name: name, Session: h.Session, Identity: h.Identity, Token: h.Token,
				Self: h.Session != "" && h.Session == id}, nil
		case errors.Is(err, backends.ErrSessionExpired) && ctx.Err() == nil:
			// The session ended under the read: read through the next one.
			c.waitSessionChange(ctx, id)
			continue
		}
		return Holder{}, fmt.Errorf("simba: holder of %q: %w", name, err)
	}
}

// currentSession returns the live session's handle, id and renewal period,
// or a nil handle and a channel closed when a session is live.
func (c *Client) currentSession() (s backends.Session, id backends.SessionID, period time.Duration,
	live <-chan struct{}, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state, closing, _ := c.m.State(); state == SessionClosed || closing {
		return nil, "", 0, nil, ErrClosed
	}
	if gen, sid, p, ok := c.m.Session(); ok {
		if h := c.sessions[gen]; h != nil {
			return h, sid, p, nil, nil
		}
	}
	return nil, "", 0, c.live, nil
}

// waitSessionChange waits, for at most a renewal interval, until the
// client's live session is no longer old.
func (c *Client) waitSessionChange(ctx context.Context, old backends.SessionID) {
	t := time.NewTimer(c.cfg.RenewInterval)
	defer t.Stop()
	for {
		c.mu.Lock()
		_, id, _, ok := c.m.Session()
		changed := !ok || id != old
		renewed := c.renewed
		c.mu.Unlock()
		if changed {
			return
		}
		select {
		case <-renewed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// WatchHolder follows who holds the lease name: the returned channel
// receives the holder as first read, then each change (another session,
// another term, free), until ctx ends or the client closes, when it is
// closed. A slow receiver delays the next read; it misses intermediate
// holders, never the current one.
//
// Changes are seen at once where the store notifies releases (a candidate
// that takes over is read right after), and otherwise within a renewal
// interval — or, for a holder that crashed, when its session runs out, as
// the store measured it. Each read is one call to the store.
func (c *Client) WatchHolder(ctx context.Context, name string) (<-chan Holder, error) {
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: watch holder: %w", err)
	}
	ch := make(chan Holder, 1)
	c.mu.Lock()
	if state, closing, _ := c.m.State(); c.shutdown || state == SessionClosed || closing {
		c.mu.Unlock()
		return nil, fmt.Errorf("simba: watch holder of %q: %w", name, ErrClosed)
	}
	c.wg.Add(1)
	w := c.holderWatches.add(name)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(ch)
		defer c.holderWatches.remove(name, w)
		c.followHolder(ctx, name, ch, w)
	}()
	return ch, nil
}

// followHolder is WatchHolder's loop.
func (c *Client) followHolder(ctx context.Context, name string, ch chan<- Holder, w chan struct{}) {
	var (
		last     *Holder
		watching backends.SessionID // the session whose Notifier wakes w
		stop     = func() {}
		quick    time.Duration // the next quick re-read after a release, 0 if none
	)
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.quit:
			return
		default:
		}
		h, remaining, err := c.readHolder(ctx, name)
		wait := c.cfg.RenewInterval
		if err != nil {
			wait = c.cfg.RenewInterval / 2
		} else {
			if last == nil || h.Session != last.Session || h.Token != last.Token || h.Self != last.Self {
				select {
				case ch <- h:
				case <-ctx.Done():
					return
				case <-c.quit:
					return
				}
				hh := h
				last = &hh
			}
			if remaining > 0 {
				wait = min(wait, time.Duration(float64(remaining)*(1+c.m.Config().Drift))+time.Millisecond)
			}
			if h.Free() && quick > 0 {
				// Released: a candidate takes it within a few round trips.
				wait = min(wait, quick)
				quick = min(2*quick, c.cfg.RenewInterval/2)
			} else if !h.Free() {
				quick = 0
			}
		}
		// Wake on the store's release notifications, through the current
		// session, and on this client's own terms ending or starting.
		if s, id, _, _, _ := c.currentSession(); s != nil && id != watching {
			stop()
			stop, watching = func() {}, id
			if n, ok := s.(backends.Notifier); ok {
				stop = n.Watch(name, func() { c.holderWatches.wake(name) })
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-w:
			quick = 2 * time.Millisecond
		case <-t.C:
		case <-ctx.Done():
		case <-c.quit:
		}
		t.Stop()
	}
}

// readHolder is Holder that also returns the holder session's remaining
// time as the store measured it (0 if unknown or free).
func (c *Client) readHolder(ctx context.Context, name string) (Holder, time.Duration, error) {
	s, id, period, _, err := c.currentSession()
	if err != nil {
		return Holder{}, 0, err
	}
	if s == nil {
		h, err := c.Holder(ctx, name) // waits for a live session
		return h, 0, err
	}
	callCtx, cancel := context.WithTimeout(ctx, period)
	defer cancel()
	h, err := s.Holder(callCtx, name)
	if err != nil {
		return Holder{}, 0, err
	}
	return Holder{Name: name, Session: h.Session, Identity: h.Identity, Token: h.Token,
		Self: h.Session != "" && h.Session == id}, h.Remaining, nil
}

// holderWatches wakes the WatchHolder loops of a name: on the store's
// release notifications and on this client's own elections and revocations
// of it, which the store does not echo back.
type holderWatches struct {
	mu     sync.Mutex
	byName map[string]map[chan struct{}]struct{}
}

func (h *holderWatches) add(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byName == nil {
		h.byName = make(map[string]map[chan struct{}]struct{})
	}
	set := h.byName[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.byName[name] = set
	}
	w := make(chan struct{}, 1)
	set[w] = struct{}{}
	return w
}

func (h *holderWatches) remove(name string, w chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byName[name], w)
	if len(h.byName[name]) == 0 {
		delete(h.byName, name)
	}
}

// watched reports whether a WatchHolder loop follows name.
func (h *holderWatches) watched(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byName[name]) > 0
}

func (h *holderWatches) wake(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.byName[name] {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}
