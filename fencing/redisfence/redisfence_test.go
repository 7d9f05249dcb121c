package redisfence

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/fencing/fencingtest"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// client connects to the test server (internal/testkit/testservers): skipped on a
// bare machine, failed under make test when Redis is missing.
func client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testservers.Redis(t), MaxRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a store under a prefix of the test's own and deletes its
// keys afterwards, so that tests never see each other's keys.
func newStore(t testing.TB, c *redis.Client, opts ...Option) *Store {
	t.Helper()
	prefix := "simba-test:fence:" + rand.Text()[:10] + ":"
	s, err := New(c, prefix, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("delete keys of %s: %v", prefix, err)
		}
	})
	return s
}

// TestConformance runs the conformance kit on the Redis recipe (F3, F4): a
// new resource id per check, under one prefix.
func TestConformance(t *testing.T) {
	s := newStore(t, client(t))
	n := 0
	fencingtest.Run(t, func(testing.TB) fencing.Resource {
		n++
		return s.Resource(fmt.Sprintf("resource-%d", n))
	})
}

// TestOneHashTag checks that both keys of a resource hash to one slot, which
// Redis Cluster needs to run the script (F3).
func TestOneHashTag(t *testing.T) {
	s, err := New(redis.NewClient(&redis.Options{}), "app:fence:")
	if err != nil {
		t.Fatal(err)
	}
	keys := s.keys("invoice:42")
	if want := []string{"app:fence:{invoice:42}:token", "app:fence:{invoice:42}:value"}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("keys = %q, want %q", keys, want)
	}
	for _, k := range keys {
		// Redis Cluster hashes the text between the first '{' and the next '}'.
		open := strings.IndexByte(k, '{')
		end := strings.IndexByte(k[open:], '}')
		if tag := k[open+1 : open+end]; tag != "invoice:42" {
			t.Errorf("key %q has hash tag %q, want the resource id", k, tag)
		}
	}
}

func TestWrite(t *testing.T) {
	c := client(t)
	s := newStore(t, c)
	ctx := t.Context()

	if err := s.Write(ctx, "job", 3, []byte("v3")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := s.Write(ctx, "job", 3, []byte("v3")); err != nil {
		t.Fatalf("retry with the same token and value: %v", err)
	}
	err := s.Write(ctx, "job", 2, []byte("v2"))
	if !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("write with token 2 after 3 = %v; want ErrStaleToken", err)
	}
	if !strings.Contains(err.Error(), "token 2 is lower than the highest token accepted, 3") {
		t.Errorf("the error does not say which token lost to which: %v", err)
	}
	// Tokens up to 2^53-1 compare exactly in Lua.
	if err := s.Write(ctx, "job", MaxToken-1, []byte("big")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "job", MaxToken-2, []byte("stale")); !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("MaxToken-2 after MaxToken-1 = %v; want ErrStaleToken", err)
	}
	if err := s.Write(ctx, "job", MaxToken, []byte("max")); err != nil {
		t.Errorf("MaxToken: %v", err)
	}
	if v, tok, err := s.Read(ctx, "job"); err != nil || tok != MaxToken || string(v) != "max" {
		t.Errorf("Read = (%q, %d, %v); want (max, %d, nil)", v, tok, err, MaxToken)
	}
	// Binary values round-trip.
	bin := []byte{0, 255, '{', '}', 0}
	if err := s.Write(ctx, "bin", 1, bin); err != nil {
		t.Fatal(err)
	}
	if v, _, err := s.Read(ctx, "bin"); err != nil || string(v) != string(bin) {
		t.Errorf("binary value read back as %q, %v", v, err)
	}
	if v, tok, err := s.Read(ctx, "never"); err != nil || tok != 0 || v != nil {
		t.Errorf("Read of a resource never written = (%q, %d, %v); want (nil, 0, nil)", v, tok, err)
	}

	// A resource that lost one of its keys is reported, not read as empty.
	c.Del(ctx, s.keys("job")[1])
	if _, _, err := s.Read(ctx, "job"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Read with the value key gone = %v; want an error", err)
	}
}

func TestBadInput(t *testing.T) {
	c := client(t)
	s := newStore(t, c, WithMaxValueSize(16))
	ctx := t.Context()

	for _, tok := range []backends.Token{0, -1, MaxToken + 1} {
		if err := s.Write(ctx, "r", tok, []byte("x")); !errors.Is(err, fencing.ErrInvalidToken) {
			t.Errorf("Write(token %d) = %v; want ErrInvalidToken", tok, err)
		}
	}
	err := s.Write(ctx, "r", 1, make([]byte, 17))
	if !errors.Is(err, fencing.ErrValueTooLarge) || !strings.Contains(err.Error(), "17 bytes; at most 16") {
		t.Errorf("Write of 17 bytes = %v; want ErrValueTooLarge naming both sizes", err)
	}
	if _, tok, _ := s.Read(ctx, "r"); tok != 0 {
		t.Errorf("rejected writes left token %d", tok)
	}
	if err := s.Write(ctx, "r", 1, make([]byte, 16)); err != nil {
		t.Errorf("Write of exactly the maximum: %v", err)
	}
	for _, id := range []string{"", "a{b", "a}b"} {
		if err := s.Write(ctx, id, 1, nil); err == nil {
			t.Errorf("Write(id %q) = nil; want an error", id)
		}
	}

	if _, err := New(nil, "p:"); err == nil {
		t.Error("New(nil client) = nil error")
	}
	if _, err := New((*redis.Client)(nil), "p:"); err == nil {
		t.Error("New((*redis.Client)(nil)) = nil error")
	}
	if _, err := New(c, "p{x}:"); err == nil {
		t.Error("New with a prefix holding a hash tag = nil error")
	}
	for _, n := range []int{-1, 512<<20 + 1} {
		if _, err := New(c, "p:", WithMaxValueSize(n)); err == nil {
			t.Errorf("WithMaxValueSize(%d) = nil error", n)
		}
	}
	var nilStore *Store
	if err := nilStore.Write(ctx, "r", 1, nil); err == nil {
		t.Error("(*Store)(nil).Write = nil")
	}
}
