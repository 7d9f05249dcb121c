package runtime

import "github.com/simba-go/simba/runtime/internal/engine"

// Snapshot returns the client's current state.
func (c *Client) Snapshot() (snap Snapshot) {
	c.d.query(func(m *engine.Machine) { snap = m.Snapshot(c.d.now(), c.d.epoch) })
	return snap
}
