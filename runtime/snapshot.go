package runtime

import "github.com/simba-go/simba/runtime/internal/engine"

// Snapshot returns the client's current state.
func (c *Client) Snapshot() (snap Snapshot) {
	c.d.query(func(m *engine.Machine) {
		now := c.d.now()
		snap = m.Snapshot(now, c.d.epoch)
		snap.Recovering = c.d.recoveringStatus(now)
	})
	return snap
}
