package memory_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/enginetest"
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
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			s := memory.New(memory.WithMaxLease(maxLease))
			return s, func() func() {
				s.Faults().SetReachability(memory.Blackhole)
				return func() { s.Faults().SetReachability(memory.Reachable) }
			}
		},
	}
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, harness(200*time.Millisecond, 600*time.Millisecond))
}

// The engine end to end on the memory store.
func TestEngine(t *testing.T) {
	enginetest.Run(t, enginetest.Harness{
		New:   func(t *testing.T) backends.Backend { return memory.New() },
		Lease: time.Second,
	})
}
