package simbazk

import (
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends/internal/watch"
)

// watcher keeps a session's watches (backends.Notifier): one ZooKeeper
// exists-watch per lease name watched, set on the lease node and set again
// after each event it delivers. go-zookeeper's event callback only records
// events (it must not block); a goroutine of the session, started by the
// first Watch, calls the watch functions and sets the watches again. After
// a reconnection go-zookeeper sets the session's watches again itself, and
// ZooKeeper then delivers what happened meanwhile.
type watcher struct {
	s   *session
	reg watch.Registry

	mu      sync.Mutex              // taken before s.mu where both are held (headFound), never after
	count   map[string]int          // watch functions per name
	armed   map[string]bool         // names whose ZooKeeper watch is set
	arm     map[string]bool         // names whose watch is to be set
	fire    map[string]bool         // names whose functions are to be called
	own     map[string]int          // deletes by this session whose events are to be skipped
	seq     map[string]int          // events per name, so that a watch set is not taken for one an event consumed
	exists  map[string]bool         // whether the lease node existed, as last seen
	target  map[string]string       // the node whose watch is set, if not the lease node (queue.go)
	setting map[string]string       // the node whose watch is being set, if not the lease node
	queue   map[string]bool         // names whose queue node is watched too (watchQueue)
	values  map[string]bool         // names whose value node to watch and read again (watchValue)
	reserve map[string]*reservation // reservations to create (queue.go)
	remove  []string                // reservation nodes to delete
	sweep   map[string]bool         // names whose unknown reservations to delete
	wake    chan struct{}
	running bool

	// watchSet, if not nil (tests), is called on the watch goroutine
	// right after it set a watch on a reservation's predecessor, before
	// it records it.
	watchSet func(name, target string)
}

func (w *watcher) init() {
	if w.count == nil {
		w.count = make(map[string]int)
		w.armed = make(map[string]bool)
		w.arm = make(map[string]bool)
		w.fire = make(map[string]bool)
		w.own = make(map[string]int)
		w.seq = make(map[string]int)
		w.exists = make(map[string]bool)
		w.target = make(map[string]string)
		w.setting = make(map[string]string)
		w.queue = make(map[string]bool)
		w.values = make(map[string]bool)
		w.reserve = make(map[string]*reservation)
		w.sweep = make(map[string]bool)
		w.wake = make(chan struct{}, 1)
	}
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Watch calls fn each time name may have become free: ZooKeeper deleted
// its lease node (a release, or the end of its holder's session: a close,
// an expiry), unless this session deleted it itself (it knows what it
// released). The watch on the node is set by the session's watch goroutine,
// so it may start a round trip late; fn runs on that goroutine and must
// return quickly; calls of one watch never overlap. The returned stop waits
// for a call of fn in progress, so fn must not call its own stop.
func (s *session) Watch(name string, fn func()) (stop func()) {
	if fn == nil { // backends.Notifier: a nil fn watches nothing
		return func() {}
	}
	w := &s.watches
	regStop := w.reg.Add(name, fn)
	w.mu.Lock()
	w.init()
	w.count[name]++
	if !w.armed[name] {
		w.arm[name] = true
	}
	start := !w.running && !s.isDead()
	w.running = w.running || start
	w.mu.Unlock()
	if start {
		go w.run()
	}
	s.reserve(name) // if it follows a refusal (queue.go)
	w.signal()
	var once sync.Once
	return func() {
		once.Do(func() {
			regStop()
			w.mu.Lock()
			if w.count[name]--; w.count[name] <= 0 {
				delete(w.count, name)
			}
			w.mu.Unlock()
			// Whoever stops watching: nobody here may wait for name any
			// more, so its reservation goes at once (queue.go).
			s.unreserve(name)
		})
	}
}

// toReserve hands the watch goroutine a reservation of name to create.
func (w *watcher) toReserve(name string, r *reservation) {
	w.mu.Lock()
	w.init()
	w.reserve[name] = r
	w.mu.Unlock()
	w.signal()
}

// rearm sets the watch of name again (after a reservation's turn not
// taken).
func (w *watcher) rearm(name string) {
	w.mu.Lock()
	if w.count[name] > 0 && !w.armed[name] {
		w.arm[name] = true
	}
	w.mu.Unlock()
	w.signal()
}

// toRemove hands the watch goroutine a reservation node to delete.
func (w *watcher) toRemove(path string) {
	w.mu.Lock()
	w.init()
	w.remove = append(w.remove, path)
	w.mu.Unlock()
	w.signal()
}

// toSweep hands the watch goroutine a name whose unknown reservations of
// this session to delete.
func (w *watcher) toSweep(name string) {
	w.mu.Lock()
	w.init()
	w.sweep[name] = true
	w.mu.Unlock()
	w.signal()
}

// reservations creates and deletes what toReserve, toRemove and toSweep
// asked for; it returns the names whose watches to set again (their
// target may have changed). What could not be done is kept for the next
// (re)connection.
func (w *watcher) reservations() []string {
	s := w.s
	w.mu.Lock()
	reserve, remove, sweep := w.reserve, w.remove, w.sweep
	w.reserve, w.remove, w.sweep = make(map[string]*reservation), nil, make(map[string]bool)
	w.mu.Unlock()
	var rearm, failed []string
	for name, r := range reserve {
		s.makeReservation(name, r)
		rearm = append(rearm, name)
	}
	for _, path := range remove {
		if !s.deleteReservation(path) {
			failed = append(failed, path)
		}
	}
	var unswept []string
	for name := range sweep {
		if !s.sweep(name) {
			unswept = append(unswept, name)
		}
	}
	if len(failed) > 0 || len(unswept) > 0 {
		w.mu.Lock()
		w.remove = append(w.remove, failed...)
		for _, name := range unswept {
			w.sweep[name] = true
		}
		w.mu.Unlock()
	}
	return rearm
}

// run is the session's watch goroutine; it ends with the session.
func (w *watcher) run() {
	s := w.s
	prefix := s.paths.leases() + "/"
	for {
		select {
		case <-s.dead:
			return
		case <-w.wake:
		}
		rearm := w.reservations()
		w.mu.Lock()
		for _, name := range rearm {
			if w.count[name] > 0 {
				w.armed[name] = false
				w.arm[name] = true
			}
		}
		fire, arm, values := w.fire, w.arm, w.values
		w.fire, w.arm, w.values = make(map[string]bool), make(map[string]bool), make(map[string]bool)
		for name := range fire {
			if w.own[name] > 0 {
				if w.own[name]--; w.own[name] == 0 {
					delete(w.own, name)
				}
				delete(fire, name)
			}
		}
		for name := range arm {
			if w.count[name] == 0 || w.armed[name] {
				delete(arm, name)
			}
		}
		w.mu.Unlock()
		for name := range fire {
			w.reg.FireFrom("", name)
		}
		for name := range values {
			_ = s.watchValue(s.conn, name) // not ok: the turn reads it
		}
		for name := range arm {
			if fire[name] && s.reserved(name) {
				// The call asks for the reservation's turn: its Acquire
				// sets the watch again if the turn is not taken (rearm),
				// so that no read competes with the turn's.
				delete(arm, name)
			}
		}
		for name := range arm {
			w.mu.Lock()
			seq := w.seq[name]
			w.mu.Unlock()
			target, lease, alone, head, err := s.watchTarget(s.conn, prefix, name)
			ok, queue := false, false
			if err == nil && !lease {
				// A predecessor's deletion may be told before this
				// goroutine records its watch below: go-zookeeper calls
				// back from its receive loop as soon as the event comes,
				// maybe right behind the reply that set it. event counts
				// it as the target's, so that it is not lost.
				w.mu.Lock()
				w.setting[name] = target
				w.mu.Unlock()
			}
			if err == nil {
				ok, _, _, err = s.conn.ExistsW(target)
				if err == nil && !lease && w.watchSet != nil {
					w.watchSet(name, target)
				}
			}
			if err == nil && alone {
				queue, err = s.watchQueue(s.conn, name)
			}
			if err == nil && !alone {
				_ = s.watchValue(s.conn, name) // not ok: the turn reads it
			}
			w.mu.Lock()
			delete(w.setting, name)
			// An event of the name since the call may already have
			// consumed the watch it set: then the event asked for another.
			fire := false
			switch {
			case err != nil || w.seq[name] != seq:
				// set again at the next (re)connection, or by the event
			case lease:
				w.armed[name] = true
				delete(w.target, name)
				w.queue[name] = queue
				// Created and deleted again between a watch's event and
				// this one's setting: the delete had no watch to tell. Or
				// the session's reservation is first with no lease node:
				// it holds the lease, which no event may tell (headFound).
				fire = !ok && (w.exists[name] || head && s.headFound(name))
				w.exists[name] = ok
			case ok:
				w.armed[name] = true
				w.target[name] = target
			default:
				// The predecessor went before its watch was set: the
				// name may be free; watch the next one.
				fire = true
				w.arm[name] = true
			}
			again := len(w.arm) > 0
			w.mu.Unlock()
			if again {
				w.signal()
			}
			if fire {
				w.reg.FireFrom("", name)
			}
			if s.isDead() {
				return
			}
		}
	}
}

// event records an event of the session's connection (called by
// go-zookeeper's callback: it must not block).
func (w *watcher) event(ev zk.Event) {
	if name, ok := strings.CutPrefix(ev.Path, w.s.paths.values()+"/"); ok {
		if w.s.valueEvent(name) { // a reservation's cache (queue.go)
			w.mu.Lock()
			if w.count != nil {
				w.values[name] = true
			}
			w.mu.Unlock()
			w.signal()
		}
		return
	}
	name, ok := strings.CutPrefix(ev.Path, w.s.paths.leases()+"/")
	queued := false
	if !ok {
		// A reservation watched: r/q/<name>/<child>.
		rest, inQueue := strings.CutPrefix(ev.Path, w.s.paths.queues()+"/")
		name, _, queued = strings.Cut(rest, "/")
		if !inQueue {
			return
		}
		if !queued { // r/q/<name> itself: a watch of the queue (watchQueue)
			w.queueEvent(name)
			return
		}
	}
	w.mu.Lock()
	if w.count == nil {
		w.mu.Unlock()
		return
	}
	prefetch := false
	if queued {
		// Only the watch set last, or being set, counts: an earlier
		// target's event would take the current watch for consumed.
		if w.target[name] == ev.Path || w.setting[name] == ev.Path {
			w.seq[name]++
			delete(w.target, name)
			w.armed[name] = false
			w.arm[name] = true
			if ev.Type == zk.EventNodeDeleted {
				w.fire[name] = true
				prefetch = true
			}
		}
		w.mu.Unlock()
		if prefetch {
			w.s.prefetch(name, ev.Path) // the turn's reads, sent at once (queue.go)
		}
		w.signal()
		return
	}
	w.seq[name]++
	switch ev.Type {
	case zk.EventNodeDeleted:
		w.exists[name] = false
		w.armed[name] = false
		w.fire[name] = true
		w.arm[name] = true
		prefetch = true
	case zk.EventNodeCreated:
		w.exists[name] = true
		w.armed[name] = false
		w.arm[name] = true
	case zk.EventNodeDataChanged, zk.EventNotWatching:
		w.armed[name] = false
		w.arm[name] = true
	}
	w.mu.Unlock()
	if prefetch {
		w.s.prefetch(name, ev.Path) // if the session has a reservation (queue.go)
	}
	w.signal()
}

// queueEvent records an event of the queue node of name, which a watch of
// a session without a reservation of name follows (watchQueue): a
// reservation queued or gone, so the holder may have changed.
func (w *watcher) queueEvent(name string) {
	w.mu.Lock()
	if w.count == nil || !w.queue[name] {
		w.mu.Unlock()
		return
	}
	w.seq[name]++
	w.queue[name] = false
	w.armed[name] = false
	w.arm[name] = true
	w.fire[name] = true
	w.mu.Unlock()
	w.signal()
}

// reconnected sets again, after a (re)connection, the watches whose setting
// failed (go-zookeeper sets the others again itself).
func (w *watcher) reconnected() {
	w.mu.Lock()
	if w.count == nil {
		w.mu.Unlock()
		return
	}
	for name := range w.count {
		if !w.armed[name] {
			w.arm[name] = true
		}
		w.values[name] = true // the reservations' caches (queue.go)
	}
	w.mu.Unlock()
	w.signal() // also retries what reservations() could not do
}

// releasing notes that this session is about to delete name's lease node,
// so that the event of its own delete does not call its own watches; it
// reports whether it counted it (only a set watch delivers the event).
func (w *watcher) releasing(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.count == nil || !w.armed[name] {
		return false
	}
	w.own[name]++
	return true
}

// released undoes releasing for a delete that did not happen.
func (w *watcher) released(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.own[name] > 0 {
		if w.own[name]--; w.own[name] == 0 {
			delete(w.own, name)
		}
	}
}

// close wakes the watch goroutine so that it ends with the session.
func (w *watcher) close() {
	w.mu.Lock()
	running := w.running
	w.mu.Unlock()
	if running {
		w.signal()
	}
}
