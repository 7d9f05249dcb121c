package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// Goroutines of one client that lock one name take turns, first come, first
// served, one at a time, as with a sync.Mutex — each turn a term of its own,
// with a greater token; Unlock of what Lock returned passes the turn on.
func TestLockSerialisesGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		ctx := context.Background()
		first, err := c.Lock(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		const n = 5
		var (
			mu      sync.Mutex
			order   []int
			tokens  []runtime.Token
			holding int
			wg      sync.WaitGroup
		)
		for i := range n {
			wg.Go(func() {
				term, err := c.Lock(ctx, "ledger")
				if err != nil {
					t.Errorf("goroutine %d: Lock: %v", i, err)
					return
				}
				mu.Lock()
				holding++
				if holding > 1 {
					t.Errorf("goroutine %d holds the lock with %d others", i, holding-1)
				}
				order = append(order, i)
				tokens = append(tokens, term.Token())
				mu.Unlock()
				time.Sleep(100 * time.Millisecond) // a step under the lock
				mu.Lock()
				holding--
				mu.Unlock()
				if err := c.Unlock(ctx, term); err != nil {
					t.Errorf("goroutine %d: Unlock: %v", i, err)
				}
			})
			synctest.Wait() // each goroutine queues before the next starts
		}
		if len(order) != 0 {
			t.Fatalf("goroutines %v got the lock while the first holder still held it", order)
		}
		if _, err := c.TryLock(ctx, "ledger"); !errors.Is(err, runtime.ErrLeaseHeld) {
			t.Errorf("TryLock while another goroutine holds the lock = %v; want ErrLeaseHeld at once", err)
		}
		if err := c.Unlock(ctx, first); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("goroutines got the lock in order %v; want first come, first served", order)
			}
		}
		prev := first.Token()
		for i, tok := range tokens {
			if tok <= prev {
				t.Errorf("turn %d: token %d; want > %d (each turn a new term)", i, tok, prev)
			}
			prev = tok
		}
	})
}

// A Lock waiting for its turn gives up when its context ends, with an error
// naming the lease and wrapping the context's; the turn passes over it; and
// Close ends every waiting Lock with ErrClosed.
func TestLockQueueCancelAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		ctx := context.Background()
		held, err := c.Lock(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = c.Lock(short, "ledger")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("queued Lock after its deadline = %v; want an error wrapping context.DeadlineExceeded", err)
		}
		if want := `simba: lock "ledger"`; err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("queued Lock error %q; want it to start with %q", err, want)
		}
		got := make(chan error, 2)
		go func() {
			term, err := c.Lock(ctx, "ledger")
			if err == nil {
				err = c.Unlock(ctx, term)
			}
			got <- err
		}()
		go func() { _, err := c.Lock(ctx, "ledger"); got <- err }()
		synctest.Wait()
		if err := c.Unlock(ctx, held); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Errorf("the next Lock after the cancelled one: %v", err)
		}
		synctest.Wait()
		// The last Lock holds the lease now, or waits; Close ends it either way.
		closeClient(t, c)
		select {
		case err := <-got:
			if err != nil && !errors.Is(err, runtime.ErrClosed) {
				t.Errorf("Lock ended by Close = %v; want nil or ErrClosed", err)
			}
		default:
		}
	})
}

// A Lock that times out says which lease, who held it and why it gave up,
// and wraps the context's error; a TryLock refused says who holds it, with
// one prefix.
func TestLockErrorsNameTheHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newClient(t, store, runtime.WithIdentity("node-a"))
		defer closeClient(t, a)
		b := newClient(t, store, runtime.WithIdentity("node-b"))
		defer closeClient(t, b)
		ctx := context.Background()
		if _, err := a.Lock(ctx, "ledger"); err != nil {
			t.Fatal(err)
		}
		session := a.Snapshot().Session
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := b.Lock(short, "ledger")
		want := `simba: lock "ledger": context deadline exceeded; it was held by node-a (session ` + string(session) + `)`
		if !errors.Is(err, context.DeadlineExceeded) || err.Error() != want {
			t.Errorf("Lock that timed out = %v; want %q, wrapping context.DeadlineExceeded", err, want)
		}
		_, err = b.TryLock(ctx, "ledger")
		want = `simba: lock "ledger": held by node-a (session ` + string(session) + `)`
		if !errors.Is(err, runtime.ErrLeaseHeld) || err.Error() != want {
			t.Errorf("TryLock refused = %v; want %q, matching ErrLeaseHeld", err, want)
		}
	})
}

// Close says what it could not hand over: here the store stops answering
// while the client closes, so the lease is neither released nor its session
// closed, and stays taken until the store expires it.
func TestCloseReportsWhatWasNotHandedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		if _, err := c.Lock(context.Background(), "ledger"); err != nil {
			t.Fatal(err)
		}
		store.Faults().SetReachability(memory.Blackhole)
		err := c.Close(context.Background())
		if err == nil {
			t.Fatal("Close with an unreachable store = nil; want an error saying what was not handed over")
		}
		for _, want := range []string{`simba: close: `, `lease "ledger" not released`, `store unreachable`, `not closed`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Close error %q; want it to contain %q", err, want)
			}
		}
		if !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("Close error %v; want it to wrap ErrUnavailable", err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("second Close = %v; want nil", err)
		}
		store.Faults().SetReachability(memory.Reachable)
		// A clean close says nothing.
		c2 := newClient(t, store)
		if _, err := c2.Lock(context.Background(), "other"); err != nil {
			t.Fatal(err)
		}
		if err := c2.Close(context.Background()); err != nil {
			t.Errorf("clean Close = %v; want nil", err)
		}
	})
}
