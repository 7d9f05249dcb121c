package runtime

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/simba-go/simba/runtime/internal/engine"
)

// A hand-over asked from outside the process (§13): an operator's tool —
// the simba command's handover — holds the lease [HandOverRequestName] of
// the election's name with a session whose identity is
// [HandOverRequestIdentity] of the successor. A leader that accepts requests
// follows that lease's holder and, whenever it sees a request while it
// leads, hands over as [Election.HandOver] would. The request is a lease
// like any other: it needs no backend support, and it ends when the tool
// releases it or its session runs out.

// handOverRequestPrefix starts the identity of a session that asks for a
// hand-over; the successor's identity follows it.
const handOverRequestPrefix = "simba handover to "

// AcceptHandOverRequests makes the election, while it leads, hand the lease
// over when asked from outside the process — by `simba handover --lease
// NAME --to IDENTITY`, or by any client that holds [HandOverRequestName]
// with the identity [HandOverRequestIdentity] — to the named successor,
// which must contend with [AcceptHandOver] (§13). It is off by default: a
// process that does not opt in is never moved by an operator's tool. It
// costs one [Client.WatchHolder] of the request lease for as long as the
// election runs. A request for a successor that does not contend is logged
// and changes nothing.
func AcceptHandOverRequests() ElectionOption {
	return func(o *electionOptions) { o.acceptRequests = true }
}

// HandOverRequestName returns the lease whose holder asks the leader of
// name to hand it over: name and ".handover-request".
func HandOverRequestName(name string) string { return name + ".handover-request" }

// HandOverRequestIdentity returns the identity of a session that asks, by
// holding [HandOverRequestName], for a hand-over to the client of identity
// to: "simba handover to " and to.
func HandOverRequestIdentity(to string) string { return handOverRequestPrefix + to }

// requestedSuccessor returns the successor a request holder's identity
// names, if it is a request.
func requestedSuccessor(identity string) (string, bool) {
	to, ok := strings.CutPrefix(identity, handOverRequestPrefix)
	return to, ok && to != ""
}

// followRequests starts the goroutine of election e that hands over on
// request; Stop and Close end it.
func (c *Client) followRequests(e *Election) error {
	name := HandOverRequestName(e.name)
	ctx, cancel := context.WithCancel(context.Background())
	err := c.d.watchHolder(name, func(w chan struct{}) {
		ch := make(chan Holder, 1)
		go func() { // ends when ctx ends or the client closes; then ch closes
			defer close(ch)
			c.followHolder(ctx, name, ch, w)
		}()
		// A request seen while another node leads is acted on if this
		// node is elected while it stands: checked every renewal interval.
		tick := time.NewTicker(c.cfg.RenewInterval)
		defer tick.Stop()
		var cur Holder
		var done, warned Token // the request last carried out, and last reported
		for {
			select {
			case h, ok := <-ch:
				if !ok {
					return
				}
				cur = h
			case <-tick.C:
			}
			to, ok := requestedSuccessor(cur.Identity)
			if !ok || cur.Token == done || e.term() == nil {
				continue
			}
			err := e.HandOver(ctx, to)
			switch {
			case err == nil:
				done = cur.Token
				c.d.logger.Info("simba: handed over on request", "lease", e.name, "to", to)
			case errors.Is(err, ErrNotLeading), errors.Is(err, ErrClosed), ctx.Err() != nil:
				// The term ended meanwhile, or the election stopped.
			case cur.Token != warned:
				// Tried again while the request stands: the successor
				// may start contending later.
				warned = cur.Token
				c.d.logger.Warn("simba: hand-over request not carried out yet", "lease", e.name, "to", to, "err", err)
			}
		}
	})
	if err != nil {
		cancel()
		return err
	}
	c.d.mu.Lock()
	c.d.requests[e.id] = cancel
	c.d.mu.Unlock()
	return nil
}

// stopRequests ends election id's following of hand-over requests, if it
// follows them.
func (d *driver) stopRequests(id engine.ContenderID) {
	d.mu.Lock()
	cancel := d.requests[id]
	delete(d.requests, id)
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
