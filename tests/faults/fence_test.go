package faults

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

// fencedWrite is one write the fenced resource accepted.
type fencedWrite struct {
	Name  string
	Node  string
	Token int64
	Seq   int
	Mono  int64 // when it was accepted, under the guard
}

// fence is the fenced resource the nodes write to: a fencing.Guard per
// lease name, served on loopback HTTP by the parent process. It records the
// writes it accepted, in the order it accepted them, and counts the stale
// ones it refused.
type fence struct {
	srv *httptest.Server

	mu       sync.Mutex
	guards   map[string]*fencing.Guard
	accepted map[string][]fencedWrite
	refused  map[string]int
	holds    []*hold
}

// hold makes the fence hold the next write of one process to a name with a
// prefix for a while before it checks it: a write in flight while its
// writer pauses, landing late.
type hold struct {
	prefix, node string
	d            time.Duration
	held         chan struct{} // closed when a write is held
}

// holdNext arms a hold for the next write of node to a name starting with
// prefix, for d; the channel is closed once a write is held. cancel disarms
// it if no write came.
func (f *fence) holdNext(prefix, node string, d time.Duration) (held <-chan struct{}, cancel func()) {
	h := &hold{prefix: prefix, node: node, d: d, held: make(chan struct{})}
	f.mu.Lock()
	f.holds = append(f.holds, h)
	f.mu.Unlock()
	return h.held, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := slices.Index(f.holds, h); i >= 0 {
			f.holds = slices.Delete(f.holds, i, i+1)
		}
	}
}

func startFence(t *testing.T) *fence {
	f := &fence{guards: map[string]*fencing.Guard{}, accepted: map[string][]fencedWrite{}, refused: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fence) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, node := q.Get("name"), q.Get("node")
	token, err1 := strconv.ParseInt(q.Get("token"), 10, 64)
	seq, err2 := strconv.Atoi(q.Get("seq"))
	if name == "" || err1 != nil || err2 != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	var h *hold
	for i, x := range f.holds {
		if x.node == node && strings.HasPrefix(name, x.prefix) {
			h = x
			f.holds = slices.Delete(f.holds, i, i+1)
			break
		}
	}
	g := f.guards[name]
	if g == nil {
		g = new(fencing.Guard)
		f.guards[name] = g
	}
	f.mu.Unlock()
	if h != nil {
		close(h.held)
		time.Sleep(h.d)
	}
	err := g.Do(backends.Token(token), func() error {
		f.mu.Lock()
		f.accepted[name] = append(f.accepted[name], fencedWrite{Name: name, Node: node, Token: token, Seq: seq, Mono: mono()})
		f.mu.Unlock()
		return nil
	})
	switch {
	case err == nil:
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, fencing.ErrStaleToken):
		f.mu.Lock()
		f.refused[name]++
		f.mu.Unlock()
		http.Error(w, err.Error(), http.StatusConflict)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// writes returns the writes accepted for name, in order, and the count of
// stale ones refused.
func (f *fence) writes(name string) ([]fencedWrite, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fencedWrite(nil), f.accepted[name]...), f.refused[name]
}
