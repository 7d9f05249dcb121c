package runtime_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// The client keeps no record of the term of a plain election (no listener,
// no task) until Election.Term asks for it — a client leading a million
// such elections keeps none. Asked for, the term is one and the same on
// every call, carries the token the store granted, and ends with its
// reason like any other: at a step-down, and at a stop.
func TestQuietTermMadeWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store, runtime.WithIdentity("node-a"))
		defer closeClient(t, c)
		e, err := c.StartElection("quiet", nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		t1 := e.Term()
		if t1 == nil || !t1.Valid() {
			t.Fatalf("Term() = %v; want a valid term", t1)
		}
		if t2 := e.Term(); t2 != t1 {
			t.Errorf("Term() twice = %p, %p; want the same term", t1, t2)
		}
		h, err := c.Holder(context.Background(), "quiet")
		if err != nil || h.Token != t1.Token() || !h.Self {
			t.Errorf("Holder = %+v, %v; want this client with the term's token %d", h, err, t1.Token())
		}
		if err := e.StepDown(context.Background(), time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case <-t1.Done():
		default:
			t.Fatal("the term's Done is open after a step-down")
		}
		if t1.Valid() || t1.Reason() != runtime.ReasonSteppedDown {
			t.Errorf("after a step-down the term is valid %v, reason %v; want ended, %v", t1.Valid(), t1.Reason(), runtime.ReasonSteppedDown)
		}
		time.Sleep(2 * time.Second) // the cooldown ends; elected again
		synctest.Wait()
		t3 := e.Term()
		if t3 == nil || t3 == t1 || t3.Token() <= t1.Token() {
			t.Fatalf("after the cooldown Term() = %v; want a new term with a greater token than %d", t3, t1.Token())
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if t3.Valid() || t3.Reason() != runtime.ReasonStopped || e.Term() != nil {
			t.Errorf("after Stop: term valid %v, reason %v, Term() %v; want ended, %v, nil", t3.Valid(), t3.Reason(), e.Term(), runtime.ReasonStopped)
		}
	})
}
