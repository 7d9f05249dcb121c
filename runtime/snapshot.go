package runtime

// Snapshot returns the client's current state.
func (c *Client) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.Snapshot(c.now(), c.epoch)
}
