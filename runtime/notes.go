package runtime

import "sync"

// Notifications the driver fans in and out, each under a lock of its own
// so that neither the backend that sends them nor the loop that waits for
// them ever waits for the driver's mutex: the store's release
// notifications (notes), and the wake-ups of WatchHolder loops
// (holderWatches).

// notes collects release notifications from backends without blocking them.
// The driver's loop takes them, unless a Lock caller waits for the name
// (attend): then it is woken instead, and takes them itself.
type notes struct {
	mu      sync.Mutex
	pending map[note]struct{}
	signal  chan struct{}
	direct  map[string]chan struct{} // name → the waiting Lock caller's wake-up
}

type note struct {
	gen  uint64
	name string
}

func (n *notes) add(gen uint64, name string) {
	n.mu.Lock()
	if n.pending == nil {
		n.pending = make(map[note]struct{})
	}
	n.pending[note{gen, name}] = struct{}{}
	wake := n.signal
	if ch := n.direct[name]; ch != nil {
		wake = ch
	}
	n.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// attend makes notifications of name wake ch rather than the driver's loop.
func (n *notes) attend(name string, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.direct == nil {
		n.direct = make(map[string]chan struct{})
	}
	n.direct[name] = ch
}

// leave ends attend's, and hands the loop what came for name meanwhile.
func (n *notes) leave(name string) {
	n.mu.Lock()
	delete(n.direct, name)
	left := false
	for k := range n.pending {
		if k.name == name {
			left = true
			break
		}
	}
	n.mu.Unlock()
	if left {
		select {
		case n.signal <- struct{}{}:
		default:
		}
	}
}

// takeName takes the notifications of name.
func (n *notes) takeName(name string) []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []note
	for k := range n.pending {
		if k.name == name {
			out = append(out, k)
			delete(n.pending, k)
		}
	}
	return out
}

func (n *notes) take() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]note, 0, len(n.pending))
	for k := range n.pending {
		out = append(out, k)
	}
	clear(n.pending)
	return out
}

// holderWatches wakes the WatchHolder loops of a name: on the store's
// release notifications and on this client's own elections and revocations
// of it, which the store does not echo back.
type holderWatches struct {
	mu     sync.Mutex
	byName map[string]map[chan struct{}]struct{}
}

func (h *holderWatches) add(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byName == nil {
		h.byName = make(map[string]map[chan struct{}]struct{})
	}
	set := h.byName[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.byName[name] = set
	}
	w := make(chan struct{}, 1)
	set[w] = struct{}{}
	return w
}

func (h *holderWatches) remove(name string, w chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byName[name], w)
	if len(h.byName[name]) == 0 {
		delete(h.byName, name)
	}
}

// watched reports whether a WatchHolder loop follows name.
func (h *holderWatches) watched(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byName[name]) > 0
}

func (h *holderWatches) wake(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.byName[name] {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}
