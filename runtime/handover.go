package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/simba-go/simba/runtime/internal/engine"
)

// AcceptHandOver makes the election a successor that a leader can hand the
// lease over to with [Election.HandOver] (§13). The candidate says so in the
// store by holding a second lease of its own session, [SuccessorName] of the
// name and the client's identity, for as long as the election runs; it costs
// one acquisition at start and one release at stop, nothing per renewal.
func AcceptHandOver() ElectionOption { return func(o *electionOptions) { o.acceptHandOver = true } }

// SuccessorName returns the lease by which the client of identity says it
// contends for name and accepts a hand-over: name, ".successor-" and 16 hex
// digits of the identity's SHA-256.
func SuccessorName(name, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return name + ".successor-" + hex.EncodeToString(sum[:8])
}

// startSuccessor starts the election that holds the successor lease name
// of election id: no listener, no task; only its term says the candidate
// is there. The driver keeps it, so that an Election costs no more memory
// for a feature few use.
func (c *Client) startSuccessor(id engine.ContenderID, name string) error {
	sid, err := c.d.start(engine.Start{Name: name, Kind: engine.KindElection}, nil)
	if err != nil {
		return err
	}
	c.d.mu.Lock()
	c.d.successors[id] = &handle{d: c.d, name: name, id: sid}
	c.d.mu.Unlock()
	return nil
}

// stopSuccessor stops the successor lease's election of election id, if
// it has one.
func (d *driver) stopSuccessor(ctx context.Context, id engine.ContenderID) error {
	d.mu.Lock()
	h := d.successors[id]
	delete(d.successors, id)
	d.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.stop(ctx)
}

// HandOver hands the lease this election leads over to the node whose
// client has identity to ([WithIdentity]), which must contend for the name
// with [AcceptHandOver] (§13). It checks that it does — its successor lease
// is held by a live session of that identity — and returns an error
// matching [ErrNotCandidate] if not, with nothing changed. Then it records
// the successor's session in the lease's value, with the term's token, and
// steps down with the hand-off order (H1), contending again at once; it
// returns once the lease is released. Every other candidate granted the
// lease while the record stands gives it back without adopting it (no term,
// no callback) and sits out for LeaseDuration from when it first saw the
// record; the successor adopts it, normally at once, woken by the release.
// If the successor is gone before it adopts, the lease goes to the others
// after that wait — no later than a crash fail-over would.
//
// It returns an error matching [ErrNotLeading] if the election holds no
// term, and the store's error if the record could not be written (the
// lease is then still held). Handing over to this client's own identity
// returns nil and changes nothing.
func (e *Election) HandOver(ctx context.Context, to string) error {
	if ctx == nil {
		return fmt.Errorf("simba: hand over %q: nil context: %w", e.name, ErrNilArgument)
	}
	if to == "" {
		return fmt.Errorf("simba: hand over %q: empty identity; want the successor's WithIdentity", e.name)
	}
	if e.term() == nil {
		return fmt.Errorf("simba: hand over %q to %q: %w", e.name, to, ErrNotLeading)
	}
	h, err := e.client.Holder(ctx, SuccessorName(e.name, to))
	if err != nil {
		return fmt.Errorf("simba: hand over %q to %q: %w", e.name, to, err)
	}
	if h.Free() || h.Identity != to {
		return fmt.Errorf("simba: hand over %q to %q: %w (no live session of that identity holds %s)",
			e.name, to, ErrNotCandidate, h.Name)
	}
	return e.d.await(ctx, func(w engine.Waiter) engine.Input { // its errors name the election
		return engine.HandOver{ID: e.id, To: h.Session, Waiter: w}
	})
}
