package watch

import (
	"sync"

	"github.com/simba-go/simba/backends"
)

// Holders is a set of watches of lease holders by name, for the backends'
// implementations of backends.HolderNotifier: the functions to call with
// each change of a name's holder. Changes reach it from two sides that do
// not wait for each other — the store's messages (grants and ends of terms,
// in the store's order) and reads of the current holder (after a watch
// starts or a subscription was reconnected, when messages may have been
// lost) — so each watch keeps the last term it told and drops whatever is
// older: a watch may miss changes across a gap, but never tells them out of
// order or twice.
//
// The zero Holders is empty and ready to use; it is safe for concurrent
// use. Calls of one watch never overlap, and no call starts after its stop
// returns.
type Holders struct {
	mu      sync.Mutex
	byName  map[string]map[*holderEntry]struct{}
	changed chan struct{} // signalled when a name is watched that was not
}

type holderEntry struct {
	fn      func(backends.Holder)
	mu      sync.Mutex // held while fn runs, so that stop can wait for it
	stopped bool
	last    backends.Token // the token of the last term told, granted or ended
	held    bool           // the last change told was a grant
}

// tell calls fn with h unless h is older than what was told: a grant must
// have a newer token than every term told; an end must end the term last
// told as granted (or a later one, whose grant was missed).
func (e *holderEntry) tell(h backends.Holder) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	if h.Session != "" {
		if h.Token <= e.last {
			return
		}
		e.held = true
	} else {
		if !e.held || h.Token < e.last {
			return
		}
		e.held = false
	}
	e.last = h.Token
	e.fn(h)
}

// Add registers fn for name and returns the function that removes it. A
// nil fn registers nothing. After stop returns, fn is not called again;
// stop may be called more than once, but not from fn.
func (r *Holders) Add(name string, fn func(backends.Holder)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	e := &holderEntry{fn: fn}
	r.mu.Lock()
	if r.byName == nil {
		r.byName = make(map[string]map[*holderEntry]struct{})
	}
	set := r.byName[name]
	if set == nil {
		set = make(map[*holderEntry]struct{})
		r.byName[name] = set
		r.signal()
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

// signal wakes the goroutine waiting on Changed. Called with mu held.
func (r *Holders) signal() {
	if r.changed == nil {
		r.changed = make(chan struct{}, 1)
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Changed returns a channel that receives after a name starts being
// watched; the backend then makes the store tell the name's changes (and
// reads its current holder, see Tell).
func (r *Holders) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{}, 1)
	}
	return r.changed
}

// Names returns the names watched, in no particular order.
func (r *Holders) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	return names
}

// Watched reports whether name is watched.
func (r *Holders) Watched(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byName[name]) > 0
}

// Len returns the number of names watched.
func (r *Holders) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byName)
}

// Tell calls the watches of name with h, a change of its holder: a grant
// (h.Session set) or the end of the term with token h.Token (h.Session
// empty). A backend tells what its store's messages say, and what a read
// of the current holder found (a free lease as an end with the token of
// its last term, if the store keeps it, else 0); each watch drops what is
// older than what it told.
func (r *Holders) Tell(name string, h backends.Holder) {
	r.mu.Lock()
	set := r.byName[name]
	if len(set) == 0 {
		r.mu.Unlock()
		return // the common case on a shared channel: nobody here watches it
	}
	entries := make([]*holderEntry, 0, len(set))
	for e := range set {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	for _, e := range entries {
		e.tell(h)
	}
}
