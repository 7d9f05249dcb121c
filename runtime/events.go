package runtime

import "context"

// The event queue: the core's events, and those the driver notices itself,
// go to the log, the observer and the WatchHolder loops of their lease, one
// at a time and in order, on a goroutine of the driver's — or on the API
// caller's own, for the few a Lock, TryLock or Unlock causes while it makes
// its call (see applyInline) — never under the driver's mutex.

// queueEvent queues e for delivery (EffEvent), unless nobody would see it.
// The caller holds d.mu, in perform.
func (d *driver) queueEvent(e Event) {
	if !d.wanted(e) {
		return // nobody would see it: spare the event queue its goroutine
	}
	ev := e
	d.wg.Add(1)
	it := queued{run: func() { defer d.wg.Done(); d.deliver(ev) }, mustRun: true}
	if d.inl.active {
		// An API caller is applying its input (applySync): it
		// delivers the event itself once it has let go of the lock,
		// sparing a goroutine that would have to be woken.
		d.events.add(it)
	} else {
		d.events.push(it)
	}
}

// report queues an event the driver itself noticed. The caller must be a
// goroutine counted in d.wg.
func (d *driver) report(e Event) {
	d.wg.Add(1)
	d.events.push(queued{run: func() { defer d.wg.Done(); d.deliver(e) }, mustRun: true})
}

// wanted reports whether deliver would do anything with e: an observer
// sees every event, the logger those of the levels it enables, and a
// WatchHolder loop of e's lease its elections and revocations.
func (d *driver) wanted(e Event) bool {
	return d.observer != nil || d.logger.Enabled(context.Background(), eventLevel(e)) ||
		(e.Kind == EventElected || e.Kind == EventRevoked) && d.holderWatches.watched(e.Name)
}

// deliver hands an event to the log and the observer, on the event queue.
func (d *driver) deliver(e Event) {
	logEvent(d.logger, e)
	if e.Kind == EventElected || e.Kind == EventRevoked {
		d.holderWatches.wake(e.Name)
	}
	if d.observer == nil {
		return
	}
	if err := protect(func() error { d.observer.Observe(e); return nil }); err != nil {
		logEvent(d.logger, Event{Kind: EventCallbackPanicked, Name: e.Name, Err: err})
	}
}
