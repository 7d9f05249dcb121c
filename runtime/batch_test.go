package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// batchStore is the memory store with sessions that batch
// (backends.BatchSession), one single call per lease in turn. Its single
// acquires wait for gate to close, so that a test can let the driver's
// queue fill behind them; it records the size of every batch, and fails
// the first failBatches batches as a whole.
type batchStore struct {
	*memory.Store
	gate chan struct{}

	mu          sync.Mutex
	sizes       []int
	failBatches int
	owned       int
}

func (bs *batchStore) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, bs.Store, opts, func(s backends.Session) backends.Session { return &batchSession{Session: s, bs: bs} })
}

type batchSession struct {
	backends.Session
	bs *batchStore
}

func (s *batchSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	select {
	case <-s.bs.gate:
	case <-ctx.Done():
		return backends.Grant{}, ctx.Err()
	}
	return s.Session.Acquire(ctx, name)
}

func (s *batchSession) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	s.bs.mu.Lock()
	s.bs.owned++
	s.bs.mu.Unlock()
	return s.Session.Owned(ctx)
}

func (s *batchSession) Watch(name string, fn func()) func() {
	return s.Session.(backends.Notifier).Watch(name, fn)
}

// batch records a batch of n, and reports whether it is to fail.
func (bs *batchStore) batch(n int) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.sizes = append(bs.sizes, n)
	if bs.failBatches > 0 {
		bs.failBatches--
		return fmt.Errorf("batch of %d: %w", n, backends.ErrUnavailable)
	}
	return nil
}

func (s *batchSession) AcquireBatch(ctx context.Context, names []string) ([]backends.AcquireResult, error) {
	if err := s.bs.batch(len(names)); err != nil {
		return nil, err
	}
	out := make([]backends.AcquireResult, len(names))
	for i, name := range names {
		out[i].Grant, out[i].Err = s.Session.Acquire(ctx, name)
	}
	return out, nil
}

func (s *batchSession) ReleaseBatch(ctx context.Context, leases []backends.Held) ([]backends.ReleaseResult, error) {
	if err := s.bs.batch(len(leases)); err != nil {
		return nil, err
	}
	out := make([]backends.ReleaseResult, len(leases))
	for i, l := range leases {
		out[i].Digest, out[i].Err = s.Session.Release(ctx, l.Name, l.Token)
	}
	return out, nil
}

// batchedElections starts n elections on a client of bs while its single
// acquires wait at the gate, with lease "lease-7" held by another session,
// then opens the gate and waits until the client leads every other lease.
func batchedElections(t *testing.T, bs *batchStore, n int) *runtime.Client {
	ctx := context.Background()
	other, _, err := bs.Store.OpenSession(ctx, backends.SessionOptions{TTL: cfg.LeaseDuration})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close(context.Background()) })
	if _, err := other.Acquire(ctx, "lease-7"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, bs)
	for i := range n {
		if _, err := c.StartElection(fmt.Sprint("lease-", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Wait()
	close(bs.gate)
	for range 100 {
		if leading(c) == n-1 {
			break
		}
		synctest.Wait()
		time.Sleep(cfg.RenewInterval / 10)
	}
	if got := leading(c); got != n-1 {
		t.Fatalf("the client leads %d leases; want %d, all but the one held by another session", got, n-1)
	}
	for _, l := range c.Snapshot().Leases {
		if l.Name == "lease-7" && l.Role == runtime.RoleLeader {
			t.Error("the client leads lease-7, which another session holds")
		}
	}
	return c
}

// Acquires queued behind those in flight go out in batches, each bounded,
// each result fed back as its own call's reply: every free lease is led,
// the one held by another session is not, and the renewals that follow
// find the digest they expect (no Owned read).
func TestBatchedAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := &batchStore{Store: memory.New(), gate: make(chan struct{})}
		const n = 2000
		c := batchedElections(t, bs, n)
		time.Sleep(3 * cfg.RenewInterval)
		bs.mu.Lock()
		sizes, owned := bs.sizes, bs.owned
		bs.mu.Unlock()
		total, largest := 0, 0
		for _, s := range sizes {
			total, largest = total+s, max(largest, s)
		}
		if len(sizes) == 0 || largest < 2 || largest > 256 {
			t.Errorf("batches of %v; want some of 2 to 256 leases", sizes)
		}
		if total < n/2 {
			t.Errorf("batches of %d leases in all; want most of the %d elections' first acquires", total, n)
		}
		if owned != 0 {
			t.Errorf("%d Owned reads after batched acquires; want none (each reply's digest follows the one before)", owned)
		}
		closeClient(t, c)
	})
}

// A batch that fails as a whole fails each of its acquires: the elections
// try again, as after a failed call of their own, and all are led.
func TestBatchFailsAsAWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := &batchStore{Store: memory.New(), gate: make(chan struct{}), failBatches: 3}
		c := batchedElections(t, bs, 500)
		bs.mu.Lock()
		left := bs.failBatches
		bs.mu.Unlock()
		if left == 3 {
			t.Error("no batch failed: the test tests nothing")
		}
		closeClient(t, c)
	})
}
