package memory_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// harness describes the memory store to the conformance suite, with every
// fault hook. It runs in real time (the suite runs its cases in parallel,
// which a synctest bubble does not allow), with short durations.
func harness(ttl, maxLease time.Duration) backendtest.Harness {
	store := func(t *testing.T, b backends.Backend) *memory.Store {
		t.Helper()
		s, ok := b.(*memory.Store)
		if !ok {
			t.Fatalf("backend is %T, want *memory.Store", b)
		}
		return s
	}
	return backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return memory.New(memory.WithMaxLease(maxLease))
		},
		TTL:         ttl,
		MaxLease:    maxLease,
		ExpiryGrace: ttl / 2,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			if !store(t, b).Faults().ExpireSession(id) {
				t.Fatalf("ExpireSession(%s): no such live session", id)
			}
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			s := memory.New(memory.WithMaxLease(maxLease))
			return s, func() time.Duration { s.Faults().Restart(); return s.MaxLease() }
		},
		// The store lives in its client's process, so a restart that keeps
		// its state is, to the client, a spell of refused calls.
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			s := memory.New(memory.WithMaxLease(maxLease))
			return s, func() {
				s.Faults().SetReachability(memory.Refuse)
				time.AfterFunc(ttl/4, func() { s.Faults().SetReachability(memory.Reachable) })
			}
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			s := memory.New(memory.WithMaxLease(maxLease))
			return s, func() func() {
				s.Faults().SetReachability(memory.Blackhole)
				return func() { s.Faults().SetReachability(memory.Reachable) }
			}
		},
		Skip: map[string]string{
			"BackendClosed": "a memory store holds no connection and no goroutine: it has no Close (io.Closer)",
		},
	}
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, harness(200*time.Millisecond, 600*time.Millisecond))
}

// The engine end to end on the memory store. A node's path to the store is
// a faultnet link in front of it (the store has no network), so that a
// scenario can cut or slow one node while the others go on.
func TestEngine(t *testing.T) {
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New:   func(t *testing.T) backends.Backend { return memory.New() },
		Lease: time.Second,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			link := faultnet.New()
			return link.Backend(b), link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			if !b.(*memory.Store).Faults().ExpireSession(id) {
				t.Fatalf("ExpireSession(%s): no such live session", id)
			}
		},
	})
}
