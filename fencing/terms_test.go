package fencing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/runtime"
)

// runtime's terms are what gates take (fencing does not import runtime, so
// the check lives here).
var _ fencing.Term = (*runtime.Term)(nil)

// lease is the lease of the terms the gate tests use: short, as tests
// against real stores use, and long enough that a term stays valid through
// a test's writes on a loaded machine.
const lease = 3 * time.Second

// newClient returns a runtime client on store, closed when the test ends.
func newClient(t testing.TB, store *memory.Store) *runtime.Client {
	t.Helper()
	c, err := runtime.NewClient(store, runtime.ConfigFor(lease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A session a test expired cannot release its leases.
		if err := c.Close(context.Background()); err != nil && !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// lockTerm returns a client on a new memory store and the term of a lock on
// name that it holds; the test ends the term with client.Unlock.
func lockTerm(t testing.TB, name string) (*runtime.Client, *runtime.Term) {
	t.Helper()
	c := newClient(t, memory.New())
	term, err := c.Lock(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return c, term
}

// electedTerm starts an election of name on a new memory store and returns
// it with the term it won; the test ends the term with StepDown or Stop.
func electedTerm(t *testing.T, name string) (*runtime.Election, *runtime.Term) {
	t.Helper()
	c := newClient(t, memory.New())
	won := make(chan *runtime.Term, 1)
	e, err := c.StartElection(name, runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) { won <- term },
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case term := <-won:
		return e, term
	case <-t.Context().Done():
		t.Fatal("the election was not won")
		return nil, nil
	}
}

// unlock ends a lock's term.
func unlock(t *testing.T, c *runtime.Client, term *runtime.Term) {
	t.Helper()
	if err := c.Unlock(t.Context(), term); err != nil {
		t.Fatal(err)
	}
	if term.Valid() {
		t.Fatal("the term is still valid after Unlock")
	}
}
