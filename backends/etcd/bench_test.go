package simbaetcd

import (
	"context"
	"fmt"
	"testing"

	"github.com/simba-go/simba/backends"
)

// The backend's own cost on the embedded server, without the engine: an
// acquire and a release beside the raw pair of two Puts (the writes they
// each are), and a renewal while holding 1,000 leases.
//
//	go test -run='^$' -bench=. -benchtime=2000x ./
func BenchmarkAcquireRelease(b *testing.B) {
	be := newBackend(b, newClient(b, nil, shared.get(b)))
	ctx := context.Background()
	s, _, err := be.OpenSession(ctx, backends.SessionOptions{TTL: testTTL})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	i := 0
	for b.Loop() {
		if i++; i%200 == 0 { // the session lives testTTL unless renewed
			if _, err := s.KeepAlive(ctx); err != nil {
				b.Fatal(err)
			}
		}
		g, err := s.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, "bench", g.Token); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawPair(b *testing.B) {
	be := newBackend(b, newClient(b, nil, shared.get(b)))
	ctx := context.Background()
	key := be.Prefix() + "raw"
	for b.Loop() {
		for range 2 {
			if _, err := be.cli.Put(ctx, key, "x"); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkKeepAlive1000(b *testing.B) {
	be := newBackend(b, newClient(b, nil, shared.get(b)))
	ctx := context.Background()
	s, _, err := be.OpenSession(ctx, backends.SessionOptions{TTL: testTTL})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	for i := range 1000 {
		if _, err := s.Acquire(ctx, fmt.Sprintf("held-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := s.KeepAlive(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
