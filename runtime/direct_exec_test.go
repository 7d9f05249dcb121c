package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// direct is the seed's "direct executor": callbacks run on the goroutine
// that hands them over, the engine's own.
func direct(f func()) error { f(); return nil }

// A direct executor works: callbacks run, paired and in order (L1, L2), on
// the client's goroutines; Snapshot, Term and the handles' calls answer
// from inside and outside a callback; StepDown, Stop and Close return. It
// deadlocked: the first callback ran under the driver's mutex, and its end
// waited for the mutex for good, with Snapshot behind it.
func TestDirectCallbackExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store, runtime.WithCallbackExecutor(direct))
		var mu sync.Mutex
		var got []string
		record := func(s string) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}
		var ep atomic.Pointer[runtime.Election]
		started := make(chan struct{}) // closed once ep holds the election
		l := runtime.ListenerFuncs{
			OnElected: func(ctx context.Context, term *runtime.Term) {
				// Calls on the client from inside the callback answer.
				<-started
				snap := c.Snapshot()
				record(fmt.Sprintf("elected %d (leases in snapshot %d, term %v)", term.Token(), len(snap.Leases), ep.Load().Term() == term))
			},
			OnRevoked: func(ctx context.Context, term *runtime.Term, r runtime.Reason) {
				record(fmt.Sprintf("revoked %d %v", term.Token(), r))
			},
		}
		var err error
		e, err := c.StartElection("report", l)
		if err != nil {
			t.Fatal(err)
		}
		ep.Store(e)
		close(started)
		synctest.Wait()
		if e.Term() == nil {
			t.Fatal("no term on a store of its own")
		}
		first := e.Term().Token()
		_ = c.Snapshot() // returned: it never did after the first callback
		if err := e.StepDown(context.Background(), time.Second); err != nil {
			t.Fatalf("StepDown: %v", err)
		}
		time.Sleep(3 * time.Second) // the cooldown, then a new term
		synctest.Wait()
		second := e.Term()
		if second == nil {
			t.Fatal("no term after the step-down's cooldown")
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}

		// A second election that stops itself from its Elected callback,
		// with the callback's context (L5), and a third left to Close.
		stopped := make(chan error, 1)
		var self *runtime.Election
		ready := make(chan struct{})
		self, err = c.StartElection("self", runtime.ListenerFuncs{OnElected: func(ctx context.Context, _ *runtime.Term) {
			<-ready
			stopped <- self.Stop(ctx)
		}})
		if err != nil {
			t.Fatal(err)
		}
		close(ready)
		var closedRevoked sync.WaitGroup
		closedRevoked.Add(1)
		if _, err := c.StartElection("left", runtime.ListenerFuncs{OnRevoked: func(context.Context, *runtime.Term, runtime.Reason) {
			closedRevoked.Done()
		}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := <-stopped; err != nil {
			t.Errorf("Stop from inside Elected = %v", err)
		}
		closeClient(t, c)
		closedRevoked.Wait()

		mu.Lock()
		defer mu.Unlock()
		want := []string{
			fmt.Sprintf("elected %d (leases in snapshot 1, term true)", first),
			fmt.Sprintf("revoked %d %v", first, runtime.ReasonSteppedDown),
			fmt.Sprintf("elected %d (leases in snapshot 1, term true)", second.Token()),
			fmt.Sprintf("revoked %d %v", second.Token(), runtime.ReasonStopped),
		}
		if !slices.Equal(got, want) {
			t.Errorf("callbacks:\n%q\nwant\n%q", got, want)
		}
	})
}
