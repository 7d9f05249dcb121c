package memory

import (
	"sync"

	"github.com/simba-go/simba/backends"
)

var _ backends.HolderNotifier = (*session)(nil)

// holderFeed is the store's side of backends.HolderNotifier: the watches by
// lease name and the changes not yet told, both guarded by the store's
// mutex, and the mutex that orders deliveries.
type holderFeed struct {
	watches map[string]map[*holderWatch]struct{}
	queue   []holderChange
	deliver sync.Mutex // held while a call delivers the queue, so that deliveries keep the store's order
}

type holderChange struct {
	name   string
	holder backends.Holder
	to     []*holderWatch // the watches of name when the change was made
}

type holderWatch struct {
	fn      func(backends.Holder)
	mu      sync.Mutex // held while fn runs, so that stop can wait for it
	stopped bool
}

// holderChanged queues the change of name's holder to h for the watches
// of name, if any. Called with mu held.
func (s *Store) holderChanged(name string, h backends.Holder) {
	ws := s.holders.watches[name]
	if len(ws) == 0 {
		return // the common case: nobody watches this name
	}
	to := make([]*holderWatch, 0, len(ws))
	for w := range ws {
		to = append(to, w)
	}
	s.holders.queue = append(s.holders.queue, holderChange{name: name, holder: h, to: to})
}

// deliverHolders tells the watches the queued changes, in order, on the
// caller's goroutine, outside the store's mutex. A call that finds another
// delivering waits for it, then delivers what was queued meanwhile: the
// queue is taken whole under mu, so the store's order is kept.
func (s *Store) deliverHolders() {
	s.holders.deliver.Lock()
	defer s.holders.deliver.Unlock()
	s.mu.Lock()
	q := s.holders.queue
	s.holders.queue = nil
	s.mu.Unlock()
	for _, c := range q {
		for _, w := range c.to {
			w.mu.Lock()
			if !w.stopped {
				w.fn(c.holder)
			}
			w.mu.Unlock()
		}
	}
}

// WatchHolder calls fn with each change of name's holder, in the order the
// store made them (backends.HolderNotifier): the new holder after a grant, a
// Holder with no Session and the ended term's Token after a release, the
// end of the holder's session (noticed lazily, by the next call to the
// store) or a restart. Calls happen on the goroutine of the store call that
// made the change, after the store's mutex is released.
func (c *session) WatchHolder(name string, fn func(backends.Holder)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	s := c.s
	w := &holderWatch{fn: fn}
	s.mu.Lock()
	if s.holders.watches == nil {
		s.holders.watches = make(map[string]map[*holderWatch]struct{})
	}
	if s.holders.watches[name] == nil {
		s.holders.watches[name] = make(map[*holderWatch]struct{})
	}
	s.holders.watches[name][w] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.holders.watches[name], w)
			if len(s.holders.watches[name]) == 0 {
				delete(s.holders.watches, name)
			}
			s.mu.Unlock()
			w.mu.Lock()
			w.stopped = true
			w.mu.Unlock()
		})
	}
}
