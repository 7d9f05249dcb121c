package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// A semaphore's size and name are checked before anything is acquired, and
// each error names what was wrong.
func TestSemaphoreInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		for _, tc := range []struct {
			name string
			n    int
			want string
		}{
			{"jobs", 0, `semaphore "jobs": 0 permits; want 1 to 1024`},
			{"jobs", -3, `-3 permits`},
			{"jobs", runtime.MaxPermits + 1, `1025 permits`},
			{"no space", 2, `invalid name "no space"`},
			{strings.Repeat("j", 120), 20, `its last permit's name`},
		} {
			if _, err := c.Semaphore(tc.name, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Semaphore(%.10q…, %d) = %v; want an error containing %q", tc.name, tc.n, err, tc.want)
			}
		}
		s, err := c.Semaphore(strings.Repeat("j", 119), 10)
		if err != nil {
			t.Fatalf("a name of 119 characters with 10 permits (permit names of 128): %v", err)
		}
		if s.Size() != 10 || s.Name() != strings.Repeat("j", 119) {
			t.Errorf("Size, Name = %d, %q", s.Size(), s.Name())
		}
	})
}

// Two clients share a semaphore of 2: TryAcquire gets a permit while one is
// free and fails with ErrLeaseHeld when none is; each permit is a term of
// its own lease with its own token; Release of a term that is not a permit
// is refused.
func TestSemaphoreTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		a, c := newClient(t, b), newClient(t, b)
		defer closeClient(t, a)
		defer closeClient(t, c)
		ctx := context.Background()
		sa, _ := a.Semaphore("jobs", 2)
		sc, _ := c.Semaphore("jobs", 2)

		p1, err := sa.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := sc.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p1.Name() == p2.Name() {
			t.Fatalf("two permits of one lease: %v and %v", p1, p2)
		}
		for _, p := range []*runtime.Term{p1, p2} {
			if p.Name() != runtime.PermitName("jobs", 0) && p.Name() != runtime.PermitName("jobs", 1) {
				t.Errorf("permit %v; want the lease jobs.permit-0 or jobs.permit-1", p)
			}
		}
		if _, err := sa.TryAcquire(ctx); !errors.Is(err, runtime.ErrLeaseHeld) || !strings.Contains(err.Error(), "all 2 permits are held") {
			t.Errorf("TryAcquire of a full semaphore = %v; want ErrLeaseHeld saying all 2 permits are held", err)
		}
		other, err := a.Lock(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		if err := sa.Release(ctx, other); err == nil || !strings.Contains(err.Error(), "not one of its permits") {
			t.Errorf("Release of a lock's term = %v; want it refused", err)
		}
		if err := sa.Release(ctx, nil); err == nil {
			t.Error("Release(nil) = nil; want an error")
		}
		if err := sa.Release(ctx, p1); err != nil {
			t.Fatal(err)
		}
		if p1.Valid() {
			t.Error("a released permit is still valid")
		}
		p3, err := sc.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire after a release: %v", err)
		}
		if p3.Name() != p1.Name() || p3.Token() <= p1.Token() {
			t.Errorf("permit %v after %v was released; want the same permit with a greater token", p3, p1)
		}
	})
}

// Acquire waits while every permit is held and takes the first one
// released, whichever it is; a wait that outlives its context says which
// semaphore and wraps the context's error; no permit is left held by the
// waits it gave up.
func TestSemaphoreAcquireWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		holder, waiter := newClient(t, b), newClient(t, b)
		defer closeClient(t, holder)
		defer closeClient(t, waiter)
		ctx := context.Background()
		sh, _ := holder.Semaphore("jobs", 3)
		sw, _ := waiter.Semaphore("jobs", 3)
		var held []*runtime.Term
		for range 3 {
			p, err := sh.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}

		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := sw.Acquire(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `semaphore "jobs"`) {
			t.Fatalf("Acquire of a full semaphore with a 1 s context = %v; want DeadlineExceeded naming the semaphore", err)
		}

		var (
			got  *runtime.Term
			werr error
			wg   sync.WaitGroup
		)
		wg.Go(func() { got, werr = sw.Acquire(ctx) })
		synctest.Wait()
		if got != nil {
			t.Fatal("Acquire returned while every permit was held")
		}
		if err := sh.Release(ctx, held[1]); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if werr != nil {
			t.Fatal(werr)
		}
		if got.Name() != held[1].Name() || !got.Valid() {
			t.Errorf("the waiter got %v (valid %v); want the permit released, %s", got, got.Valid(), held[1].Name())
		}
		// The waiter's other waits were given up: it holds one permit only.
		time.Sleep(runtime.DefaultConfig().RenewInterval) // past every attempt they could have made
		synctest.Wait()
		held2 := 0
		for i := range 3 {
			h, err := waiter.Holder(ctx, runtime.PermitName("jobs", i))
			if err != nil {
				t.Fatal(err)
			}
			if h.Self {
				held2++
			}
		}
		if held2 != 1 {
			t.Errorf("the waiter holds %d permits; want 1", held2)
		}
	})
}

// Acquire with a nil context is an error, not a panic.
func TestSemaphoreNilContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		s, _ := c.Semaphore("jobs", 1)
		//lint:ignore SA1012 a nil context is the misuse under test
		if _, err := s.Acquire(nil); err == nil || !strings.Contains(err.Error(), "nil context") { //nolint:staticcheck
			t.Errorf("Acquire(nil) = %v; want an error saying nil context", err)
		}
	})
}
