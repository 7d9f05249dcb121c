package runtime

import (
	"context"
	"errors"
	"fmt"
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

// Holder reads who holds the lease name now, from the store, whether or not
// this client contends for it. It waits for the client's session to be live
// (a read is made through it), and makes one call to the store, bounded by
// the renewal period as every backend call is. A lease whose holder's
// session expired reads as free.
func (c *Client) Holder(ctx context.Context, name string) (Holder, error) {
	if err := backends.ValidateName(name); err != nil {
		return Holder{}, fmt.Errorf("simba: holder: %w", err)
	}
	if err := checkContext("holder", ctx); err != nil {
		return Holder{}, err
	}
	for {
		s, id, period, live, err := c.d.session()
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
			c.d.waitSessionChange(ctx, id, c.cfg.RenewInterval)
			continue
		}
		return Holder{}, fmt.Errorf("simba: holder of %q: %w", name, err)
	}
}

// WatchHolder follows who holds the lease name: the returned channel
// receives the holder as first read, then each change (another session,
// another term, free), until ctx ends or the client closes, when it is
// closed.
//
// Where the store tells every change of holder (backends.HolderNotifier:
// the memory store, Redis and PostgreSQL), every holder is sent, short
// holds included, in order, however slow the receiver; across a lost
// connection to the store a change may be missed (the holder is read again
// then, and at least every renewal interval), never reordered. Elsewhere
// (ZooKeeper, etcd, MySQL) changes are seen at once where the
// store notifies releases (a candidate that takes over is read right
// after), and otherwise within a renewal interval — or, for a holder that
// crashed, when its session runs out, as the store measured it; a slow
// receiver delays the next read, and misses intermediate holders, never
// the current one. Each read is one call to the store.
func (c *Client) WatchHolder(ctx context.Context, name string) (<-chan Holder, error) {
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: watch holder: %w", err)
	}
	if err := checkContext("watch holder", ctx); err != nil {
		return nil, err
	}
	ch := make(chan Holder, 1)
	if err := c.d.watchHolder(name, func(w chan struct{}) {
		defer close(ch)
		c.followHolder(ctx, name, ch, w)
	}); err != nil {
		return nil, fmt.Errorf("simba: watch holder of %q: %w", name, err)
	}
	return ch, nil
}

// followHolder is WatchHolder's loop.
//
// Where the session's store tells every change of holder
// (backends.HolderNotifier), the loop sends each change it is told, in
// order, so that holds shorter than a read are reported too; it reads the
// holder first, and again every renewal interval without a change, to
// catch up with what a reconnection may have lost. Elsewhere it reads the
// holder each time the store's release notifications or this client's own
// elections and revocations wake it, and every renewal interval.
func (c *Client) followHolder(ctx context.Context, name string, ch chan<- Holder, w chan struct{}) {
	var (
		last      *Holder
		lastToken Token              // the highest token seen, read or told
		watching  backends.SessionID // the session whose Notifier wakes w
		stop      = func() {}
		quick     time.Duration // the next quick re-read after a release, 0 if none
		pushing   bool          // watching's store tells every change (pushed)
		pushed    pushedHolders
		woken     bool // the last wait ended on w, not on the timer
	)
	defer func() { stop() }()
	send := func(h Holder) bool {
		select {
		case ch <- h:
			hh := h
			last = &hh
			return true
		case <-ctx.Done():
		case <-c.d.quit:
		}
		return false
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.d.quit:
			return
		default:
		}
		wait := c.cfg.RenewInterval
		if told := pushed.take(); len(told) > 0 {
			_, id, _, _, _ := c.d.session()
			for _, bh := range told {
				if h, ok := toldHolder(name, bh, id, last, lastToken); ok && !send(h) {
					return
				}
				lastToken = max(lastToken, bh.Token)
			}
		} else if !pushing || !woken {
			h, remaining, err := c.readHolder(ctx, name)
			if err != nil {
				wait = c.cfg.RenewInterval / 2
			} else {
				lastToken = max(lastToken, h.Token)
				if last == nil || h.Session != last.Session || h.Token != last.Token || h.Self != last.Self {
					if !send(h) {
						return
					}
				}
				if remaining > 0 && !pushing {
					wait = min(wait, time.Duration(float64(remaining)*(1+c.d.cfg.Drift))+time.Millisecond)
				}
				if h.Free() && quick > 0 && !pushing {
					// Released: a candidate takes it within a few round trips.
					wait = min(wait, quick)
					quick = min(2*quick, c.cfg.RenewInterval/2)
				} else if !h.Free() {
					quick = 0
				}
			}
		}
		// Follow the store's changes, through the current session: every
		// change where it tells them, else its release notifications; and
		// this client's own terms ending or starting.
		if s, id, _, _, _ := c.d.session(); s != nil && id != watching {
			stop()
			stop, watching, pushing = func() {}, id, false
			if hn, ok := s.(backends.HolderNotifier); ok {
				stop, pushing = hn.WatchHolder(name, func(h backends.Holder) {
					pushed.add(h)
					c.d.holderWatches.wake(name)
				}), true
			} else if n, ok := s.(backends.Notifier); ok {
				stop = n.Watch(name, func() { c.d.holderWatches.wake(name) })
			}
		}
		if pushed.pending() {
			woken = true
			continue
		}
		t := time.NewTimer(wait)
		woken = false
		select {
		case <-w:
			woken = true
			quick = 2 * time.Millisecond
		case <-t.C:
		case <-ctx.Done():
		case <-c.d.quit:
		}
		t.Stop()
	}
}

// toldHolder turns a change the store told (backends.HolderNotifier) into
// the Holder to send, given the last one sent and the highest token seen:
// a grant newer than every token seen, or the release of the term last
// sent (or of a later one). A change the loop has seen already (told
// before a read that saw its outcome) is dropped.
func toldHolder(name string, bh backends.Holder, self backends.SessionID, last *Holder, lastToken Token) (Holder, bool) {
	if bh.Session != "" {
		return Holder{Name: name, Session: bh.Session, Identity: bh.Identity, Token: bh.Token,
			Self: bh.Session == self}, bh.Token > lastToken
	}
	return Holder{Name: name}, last != nil && !last.Free() && bh.Token >= last.Token
}

// pushedHolders are the changes of holder a HolderNotifier told a
// WatchHolder loop, in order, not yet sent. The store's goroutine adds
// them, so the loop keeps them all however slow its receiver: a watch
// reports every change.
type pushedHolders struct {
	mu    sync.Mutex
	items []backends.Holder
}

func (p *pushedHolders) add(h backends.Holder) {
	p.mu.Lock()
	p.items = append(p.items, h)
	p.mu.Unlock()
}

func (p *pushedHolders) take() []backends.Holder {
	p.mu.Lock()
	defer p.mu.Unlock()
	items := p.items
	p.items = nil
	return items
}

func (p *pushedHolders) pending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.items) > 0
}

// readHolder is Holder that also returns the holder session's remaining
// time as the store measured it (0 if unknown or free).
func (c *Client) readHolder(ctx context.Context, name string) (Holder, time.Duration, error) {
	s, id, period, _, err := c.d.session()
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
