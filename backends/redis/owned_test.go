package simbaredis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
)

// Owned reads a session's leases in pages, one call each, so that a session
// holding a million leases never blocks Redis for long; the pages add up to
// the whole set, with the digest of the same instant.
func TestOwnedPages(t *testing.T) {
	addr, admin := sharedRedis(t)
	old := ownedPage
	ownedPage = 7
	t.Cleanup(func() { ownedPage = old })
	client := newClient(t, addr)
	var calls int
	client.AddHook(countEvals{&calls})
	b := newBackend(t, client, admin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var want []backends.Held
	for i := range 21 {
		name := "lease-" + strconv.Itoa(i)
		g, err := s.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, backends.Held{Name: name, Token: g.Token})
	}
	slices.SortFunc(want, func(a, b backends.Held) int { return strings.Compare(a.Name, b.Name) })
	ka, err := s.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls = 0
	held, d, err := s.Owned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(held, want) || d != ka.Digest {
		t.Errorf("Owned in pages = %v, %+v; want %v, %+v", held, d, want, ka.Digest)
	}
	// 21 leases in pages of 7: 3 full pages and an empty one.
	if calls != 4 {
		t.Errorf("Owned of 21 leases in pages of 7 took %d calls; want 4", calls)
	}
}

// countEvals counts the scripts a client runs.
type countEvals struct{ n *int }

func (countEvals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c countEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			*c.n++
		}
		return next(ctx, cmd)
	}
}
func (countEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
