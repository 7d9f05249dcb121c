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

	mu      sync.Mutex
	count   map[string]int  // watch functions per name
	armed   map[string]bool // names whose ZooKeeper watch is set
	arm     map[string]bool // names whose watch is to be set
	fire    map[string]bool // names whose functions are to be called
	own     map[string]int  // deletes by this session whose events are to be skipped
	seq     map[string]int  // events per name, so that a watch set is not taken for one an event consumed
	exists  map[string]bool // whether the lease node existed, as last seen
	wake    chan struct{}
	running bool
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
		})
	}
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
		w.mu.Lock()
		fire, arm := w.fire, w.arm
		w.fire, w.arm = make(map[string]bool), make(map[string]bool)
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
		for name := range arm {
			w.mu.Lock()
			seq := w.seq[name]
			w.mu.Unlock()
			ok, _, _, err := s.conn.ExistsW(prefix + name)
			w.mu.Lock()
			// An event of the name since the call may already have
			// consumed the watch it set: then the event asked for another.
			fire := false
			if err == nil && w.seq[name] == seq {
				w.armed[name] = true
				// Created and deleted again between a watch's event and
				// this one's setting: the delete had no watch to tell.
				fire = w.exists[name] && !ok
				w.exists[name] = ok
			} // else: set again at the next (re)connection
			w.mu.Unlock()
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
	name, ok := strings.CutPrefix(ev.Path, w.s.paths.leases()+"/")
	if !ok {
		return
	}
	w.mu.Lock()
	if w.count == nil {
		w.mu.Unlock()
		return
	}
	w.seq[name]++
	switch ev.Type {
	case zk.EventNodeDeleted:
		w.exists[name] = false
		w.armed[name] = false
		w.fire[name] = true
		w.arm[name] = true
	case zk.EventNodeCreated:
		w.exists[name] = true
		w.armed[name] = false
		w.arm[name] = true
	case zk.EventNodeDataChanged, zk.EventNotWatching:
		w.armed[name] = false
		w.arm[name] = true
	}
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
	}
	w.mu.Unlock()
	w.signal()
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
