package faults

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

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
	g := f.guards[name]
	if g == nil {
		g = new(fencing.Guard)
		f.guards[name] = g
	}
	f.mu.Unlock()
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
