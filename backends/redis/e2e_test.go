package simbaredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime"
)

// A1, H1, T2, F5: two nodes on the real Redis; the leader stops gracefully
// and the other takes over at once, woken by the release notification
// rather than by its next attempt (RenewInterval/2 + jitter ≥ 333 ms here).
func TestEndToEndHandOff(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	a := startNode(t, "a", b, "report")
	ta := a.WaitElected(5 * time.Second)
	c := startNode(t, "c", sameNamespace(t, b, newClient(t, addr)), "report")
	c.NotElected(2 * testConfig.RenewInterval)

	// Let c's next attempt be far away, so that only a notification can
	// explain a prompt take-over.
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := a.E.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	tc := c.WaitElected(5 * time.Second)
	took := time.Since(start)
	t.Logf("graceful hand-off took %v", took)
	ta.WaitEnded(t, time.Second)
	if took > 300*time.Millisecond {
		t.Errorf("graceful hand-off took %v; want it prompt, through the release notification (A1)", took)
	}
	if ta.Reason != runtime.ReasonStopped {
		t.Errorf("a's term ended with %v; want %v", ta.Reason, runtime.ReasonStopped)
	}
	if !ta.EndedAt.Before(tc.ElectedAt) {
		t.Errorf("a's term ended at %v, after c was elected at %v: two valid terms (T2)", ta.EndedAt, tc.ElectedAt)
	}
	if tc.Term.Token() <= ta.Term.Token() {
		t.Errorf("c's token %d; want > a's %d (T2, F5)", tc.Term.Token(), ta.Term.Token())
	}
}

// §13, T5: Lock, TryLock and Unlock on the real Redis.
func TestEndToEndLock(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, err := runtime.NewClient(b, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close(ctx)
	c2, err := runtime.NewClient(sameNamespace(t, b, newClient(t, addr)), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)

	t1, err := c1.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := c2.TryLock(ctx, "job"); !errors.Is(err, runtime.ErrLeaseHeld) {
		t.Fatalf("TryLock of a held lock = %v; want ErrLeaseHeld", err)
	}
	done := make(chan *runtime.Term, 1)
	go func() {
		t2, err := c2.Lock(ctx, "job")
		if err != nil {
			t.Errorf("Lock: %v", err)
		}
		done <- t2
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c1.Unlock(ctx, t1); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if t1.Valid() {
		t.Error("unlocked term still valid")
	}
	t2 := <-done
	if t2 == nil {
		return
	}
	if t2.Token() <= t1.Token() {
		t.Errorf("second lock's token %d; want > %d", t2.Token(), t1.Token())
	}
	if err := c2.Unlock(ctx, t2); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
