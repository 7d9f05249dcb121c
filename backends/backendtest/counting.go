package backendtest

import (
	"context"
	"sync/atomic"

	"github.com/simba-go/simba/backends"
)

// countingBackend wraps a backend for the benchmarks, counting what its
// sessions are asked: Owned reads and acquire calls. Its sessions implement
// backends.Notifier where the wrapped ones do (watches that never fire
// where they do not), and backends.BatchSession exactly where the wrapped
// ones do, so that the runtime drives them as it drives the store's own.
type countingBackend struct {
	backends.Backend
	owned, acquireCalls, acquired atomic.Int64
}

// callCounts is what a countingBackend counted so far.
type callCounts struct {
	owned, acquireCalls, acquired int64
}

func (b *countingBackend) counts() callCounts {
	return callCounts{owned: b.owned.Load(), acquireCalls: b.acquireCalls.Load(), acquired: b.acquired.Load()}
}

func (b *countingBackend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	s, r, err := b.Backend.OpenSession(ctx, opts)
	if err != nil {
		return nil, r, err
	}
	cs := &countingSession{Session: s, b: b}
	if bs, ok := s.(backends.BatchSession); ok {
		return &countingBatchSession{countingSession: cs, batch: bs}, r, nil
	}
	return cs, r, nil
}

type countingSession struct {
	backends.Session
	b *countingBackend
}

func (s *countingSession) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	s.b.owned.Add(1)
	return s.Session.Owned(ctx)
}

func (s *countingSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	s.b.acquireCalls.Add(1)
	s.b.acquired.Add(1)
	return s.Session.Acquire(ctx, name)
}

func (s *countingSession) Watch(name string, fn func()) (stop func()) {
	if n, ok := s.Session.(backends.Notifier); ok {
		return n.Watch(name, fn)
	}
	return func() {}
}

type countingBatchSession struct {
	*countingSession
	batch backends.BatchSession
}

func (s *countingBatchSession) AcquireBatch(ctx context.Context, names []string) ([]backends.AcquireResult, error) {
	s.b.acquireCalls.Add(1)
	s.b.acquired.Add(int64(len(names)))
	return s.batch.AcquireBatch(ctx, names)
}

func (s *countingBatchSession) ReleaseBatch(ctx context.Context, leases []backends.Held) ([]backends.ReleaseResult, error) {
	return s.batch.ReleaseBatch(ctx, leases)
}
