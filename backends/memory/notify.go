package memory

// Watch calls fn, on the goroutine of the store call that noticed it and
// after the store's mutex is released, each time name is released, its
// holder's session is closed or found expired (expiry is noticed lazily, by
// the next call to the store), or the store restarts; never for a release by
// this session itself, which tells it nothing new. fn must return quickly;
// calls of one watch never overlap. The returned stop waits for a call of fn in
// progress on another goroutine, so fn must not call its own stop.
func (c *session) Watch(name string, fn func()) (stop func()) {
	return c.s.watches.AddFor(string(c.id), name, fn)
}
