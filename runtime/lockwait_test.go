package runtime_test

import (
	"context"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// stackBackend records, for each Acquire, whether a waiting Lock caller's
// goroutine made it (the driver's waitLock is on its stack).
type stackBackend struct {
	backends.Backend
	mu       sync.Mutex
	byWaiter []bool
}

func (b *stackBackend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, b.Backend, opts, func(s backends.Session) backends.Session {
		return &stackSession{Session: s, Notifier: s.(backends.Notifier), b: b}
	})
}

type stackSession struct {
	backends.Session
	backends.Notifier
	b *stackBackend
}

func (s *stackSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	buf := make([]byte, 16<<10)
	stack := string(buf[:goruntime.Stack(buf, false)])
	s.b.mu.Lock()
	s.b.byWaiter = append(s.b.byWaiter, strings.Contains(stack, "runtime.(*driver).waitLock"))
	s.b.mu.Unlock()
	return s.Session.Acquire(ctx, name)
}

func (b *stackBackend) acquires() []bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bool(nil), b.byWaiter...)
}

// A1, H1: a Lock caller waiting for its lease is woken by the release
// notification itself and makes the acquire that wins the lease on its own
// goroutine, as it made its first attempts: a graceful hand-off to a
// waiting Lock wakes that one goroutine, not the client's loop, then a
// goroutine for the call, then the waiter.
func TestWaitingLockMakesItsOwnAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newClient(t, store)
		defer closeClient(t, a)
		rec := &stackBackend{Backend: store}
		b := newClient(t, rec)
		defer closeClient(t, b)
		ctx := context.Background()
		held, err := a.Lock(ctx, "mutex")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *runtime.Term, 1)
		go func() {
			tb, err := b.Lock(ctx, "mutex")
			if err != nil {
				t.Error(err)
			}
			got <- tb
		}()
		synctest.Wait() // b was refused, and waits
		before := len(rec.acquires())
		if before == 0 {
			t.Fatal("no acquire before the hand-off; want b's, refused")
		}
		if err := a.Unlock(ctx, held); err != nil {
			t.Fatal(err)
		}
		tb := <-got
		defer b.Unlock(ctx, tb)
		acq := rec.acquires()
		if len(acq) != before+1 || !acq[before] {
			t.Errorf("acquires made by the waiting Lock's goroutine: %v; want the %d refused ones, then the winning one, by the waiter", acq, before)
		}
	})
}
