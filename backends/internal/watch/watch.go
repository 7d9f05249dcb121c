// Package watch keeps the watches of backends.Notifier for the backends: per
// lease name, the functions to call when the lease may have become free.
//
// It holds the part that is easy to get subtly wrong, once: calls of one
// watch never overlap, a watch's stop waits for a call of it in progress, and
// no call starts after stop returns. Calls happen on the caller's goroutine,
// outside the registry's lock, so a backend fires only after releasing locks
// of its own.
package watch

import "sync"

// Registry is a set of watches by lease name. The zero Registry is empty and
// ready to use; it is safe for concurrent use.
type Registry struct {
	mu     sync.Mutex
	byName map[string]map[*entry]struct{}
}

type entry struct {
	owner   string // the watching session, if the backend says (AddFor)
	fn      func()
	mu      sync.Mutex // held while fn runs, so that stop can wait for it
	stopped bool
}

func (e *entry) fire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped {
		e.fn()
	}
}

// Add registers fn for name and returns the function that removes it. After
// stop returns, fn is not called again; stop may be called more than once,
// but not from fn.
func (r *Registry) Add(name string, fn func()) (stop func()) { return r.AddFor("", name, fn) }

// AddFor is Add for a watch of session owner: [Registry.FireFrom] does not
// call it for that session's own releases.
//
// A nil fn registers nothing (backends.Notifier): stop does nothing.
func (r *Registry) AddFor(owner, name string, fn func()) (stop func()) {
	if fn == nil {
		return func() {}
	}
	e := &entry{owner: owner, fn: fn}
	r.mu.Lock()
	if r.byName == nil {
		r.byName = make(map[string]map[*entry]struct{})
	}
	set := r.byName[name]
	if set == nil {
		set = make(map[*entry]struct{})
		r.byName[name] = set
	}
	set[e] = struct{}{}
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if set := r.byName[name]; set != nil {
				delete(set, e)
				if len(set) == 0 {
					delete(r.byName, name)
				}
			}
			r.mu.Unlock()
			e.mu.Lock()
			e.stopped = true
			e.mu.Unlock()
		})
	}
}

// FireFrom calls the watches of name after session from released it, except
// from's own: a session's release tells it nothing new. An empty from skips
// none.
func (r *Registry) FireFrom(from, name string) {
	r.mu.Lock()
	none := len(r.byName[name]) == 0
	r.mu.Unlock()
	if none {
		return // the common case, a release nobody here waits for: no allocation
	}
	r.fire(func(yield func(*entry)) {
		for e := range r.byName[name] {
			if from == "" || e.owner != from {
				yield(e)
			}
		}
	})
}

// FireAll calls every watch, for instance after notifications may have been
// lost (a reconnection, a store that restarted).
func (r *Registry) FireAll() {
	r.fire(func(yield func(*entry)) {
		for _, set := range r.byName {
			for e := range set {
				yield(e)
			}
		}
	})
}

// fire collects the entries under the lock and calls them outside it.
func (r *Registry) fire(each func(yield func(*entry))) {
	var entries []*entry
	r.mu.Lock()
	each(func(e *entry) { entries = append(entries, e) })
	r.mu.Unlock()
	for _, e := range entries {
		e.fire()
	}
}

// Len returns the number of names watched.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byName)
}
