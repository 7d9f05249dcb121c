package simbaredis

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/redact"
)

func TestNewRejectsBadOptions(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer good.Close()
	noDeadlines := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer noDeadlines.Close()
	cases := []struct {
		name   string
		client redis.UniversalClient
		opts   []Option
		want   string // in the error
	}{
		{"nil client", nil, nil, "nil client"},
		{"empty prefix", good, []Option{WithPrefix("")}, "WithPrefix"},
		{"brace in prefix", good, []Option{WithPrefix("a{b}")}, "WithPrefix"},
		{"long prefix", good, []Option{WithPrefix(strings.Repeat("p", 65))}, "WithPrefix"},
		{"zero MaxLease", good, []Option{WithMaxLease(0)}, "WithMaxLease"},
		{"sub-millisecond MaxLease", good, []Option{WithMaxLease(time.Microsecond)}, "WithMaxLease"},
		{"no context deadlines", noDeadlines, nil, "ContextTimeoutEnabled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := New(c.client, c.opts...)
			if err == nil {
				b.Close()
				t.Fatalf("New = nil error; want one mentioning %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("New = %v; want an error mentioning %q", err, c.want)
			}
		})
	}
	b, err := New(good, WithPrefix("app-1.jobs:x_y"), WithMaxLease(time.Second))
	if err != nil {
		t.Fatalf("New with valid options: %v", err)
	}
	defer b.Close()
	if b.Prefix() != "app-1.jobs:x_y" || b.MaxLease() != time.Second {
		t.Errorf("Prefix, MaxLease = %q, %v", b.Prefix(), b.MaxLease())
	}
}

// §12: credentials in URLs never appear in errors or logs.
func TestRedactURL(t *testing.T) {
	for _, raw := range []string{
		"redis://user:s3cret@host:6379/0",
		"redis://:s3cret@host:6379",
		"redis://s3cret@host",
		"rediss://user:s3cret@host/2?dial_timeout=3&client_name=s3cret",
		"redis://user:s3cret@[::1", // does not parse
		"redis://us%zzer:s3cret@host",
	} {
		if got := redact.URL(raw); strings.Contains(got, "s3cret") {
			t.Errorf("redact.URL(%q) = %q; want the secret gone", raw, got)
		}
	}
	if got := redact.URL("redis://user:pw@host:6379/1"); got != "redis://user:xxxxx@host:6379/1" {
		t.Errorf("redactURL = %q; want the user, host and database kept", got)
	}
}

func TestOpen(t *testing.T) {
	addr, admin := sharedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := uniquePrefix()
	b, err := Open(ctx, "redis://"+addr+"/0", WithPrefix(prefix))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { deleteKeys(t, admin, b.keys) })
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Backend.Close: %v", err)
	}
	if err := b.client.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("the client Open made after Close: Ping = %v; want it closed", err)
	}
	if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("OpenSession after Close = %v; want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}

	for _, raw := range []string{
		"http://user:s3cret@" + addr,           // wrong scheme
		"redis://user:s3cret@" + addr + "/x",   // bad database
		"redis://user:s3cret@127.0.0.1:1/0",    // nobody listens
		"redis://user:s3cret@" + addr + "/0?x", // unknown option
	} {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		b, err := Open(ctx, raw)
		cancel()
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) = nil error; want one", redact.URL(raw))
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open error %q shows the password", err)
		}
	}
	ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Open(ctx, "redis://127.0.0.1:1/0")
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("Open of a closed port took %v; want it to fail at once (no dial retries)", took)
	}
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Open of a closed port = %v; want ErrUnavailable", err)
	}
}

// A namespace written by another layout version is refused by every call.
func TestLayoutMismatch(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx := context.Background()
	if err := b.Check(ctx); err != nil {
		t.Fatalf("Check of a new namespace: %v", err)
	}
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.HSet(ctx, b.keys.meta(), "layout", "999").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx); !errors.Is(err, ErrLayout) {
		t.Errorf("Check = %v; want ErrLayout", err)
	}
	if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); !errors.Is(err, ErrLayout) {
		t.Errorf("OpenSession = %v; want ErrLayout", err)
	}
	if _, err := s.KeepAlive(ctx); !errors.Is(err, ErrLayout) {
		t.Errorf("KeepAlive = %v; want ErrLayout", err)
	}
}

// countCalls counts the commands a client sends.
type countCalls struct{ n atomic.Int64 }

func (c *countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// S1, §12: every operation is one command, and a keep-alive stays one
// command however many leases the session holds.
//
// A script is sent as EVALSHA, and as EVAL after a NOSCRIPT reply from a
// Redis that has not run it yet (a fresh server, or after SCRIPT FLUSH): the
// first call of each operation may cost two commands. So the sequence runs
// once uncounted, which loads every script, and then once counted.
func TestOneCommandPerCall(t *testing.T) {
	addr, admin := sharedRedis(t)
	client := newClient(t, addr)
	var calls countCalls
	client.AddHook(&calls)
	b := newBackend(t, client, admin)
	ctx := context.Background()
	sequence := func(counted bool) {
		t.Helper()
		one := func(what string, f func() error) {
			t.Helper()
			before := calls.n.Load()
			if err := f(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if n := calls.n.Load() - before; counted && n != 1 {
				t.Errorf("%s sent %d commands; want 1", what, n)
			}
		}
		one("Check", func() error { return b.Check(ctx) })
		var s backends.Session
		one("OpenSession", func() (err error) {
			s, _, err = b.OpenSession(ctx, backends.SessionOptions{TTL: b.MaxLease()})
			return err
		})
		defer s.Close(ctx)
		one("Join", func() error { return s.Join(ctx, "group", 4) })
		var tok backends.Token
		for i := range 300 {
			name := backends.PartitionName("lease", i)
			one("Acquire", func() error { g, err := s.Acquire(ctx, name); tok = g.Token; return err })
		}
		one("KeepAlive with 300 leases", func() error { _, err := s.KeepAlive(ctx); return err })
		one("PutValue", func() error { return s.PutValue(ctx, "lease.299", tok, []byte("v")) })
		one("Release", func() error { _, err := s.Release(ctx, "lease.299", tok); return err })
		one("Owned", func() error { _, _, err := s.Owned(ctx); return err })
		one("Members", func() error { _, err := s.Members(ctx, "group"); return err })
		one("Leave", func() error { return s.Leave(ctx, "group") })
		one("Close", func() error { return s.Close(ctx) })
	}
	sequence(false) // loads the scripts
	sequence(true)
}

// F5, §15: tokens stay below 2^53, the largest range in which Lua's numbers
// (doubles) hold every integer. With the namespace's token counter set just
// below it (behind the backend's back, by a raw client), the next grant gets
// 2^53-1 exactly, and every grant after it is refused — with an error that
// is not ErrLeaseHeld, since waiting does not help — leaving the counter,
// the leases held and the session as they were.
func TestTokensStayBelow2To53(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx := context.Background()
	const maxToken = 1<<53 - 1
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: b.MaxLease()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := admin.HSet(ctx, b.keys.meta(), "token", maxToken-1).Err(); err != nil {
		t.Fatal(err)
	}

	g, err := s.Acquire(ctx, "last")
	if err != nil {
		t.Fatalf("Acquire with the counter at 2^53-2: %v; want token 2^53-1", err)
	}
	if g.Token != maxToken {
		t.Errorf("token %d with the counter at 2^53-2; want exactly 2^53-1 = %d", g.Token, int64(maxToken))
	}
	refused := func(name string) {
		t.Helper()
		g, err := s.Acquire(ctx, name)
		switch {
		case err == nil:
			t.Errorf("Acquire(%q) with the counter at 2^53-1 granted token %d; want it refused (F5)", name, g.Token)
		case errors.Is(err, backends.ErrLeaseHeld):
			t.Errorf("Acquire(%q) with the counter at 2^53-1 = %v; want an error other than ErrLeaseHeld", name, err)
		}
	}
	refused("next")
	// A lease the session holds is granted again with its token (no new
	// token needed); once released, it needs a new one.
	if g2, err := s.Acquire(ctx, "last"); err != nil || g2.Token != maxToken {
		t.Errorf("Acquire of a held lease = %d, %v; want its token %d", g2.Token, err, int64(maxToken))
	}
	if _, err := s.Release(ctx, "last", maxToken); err != nil {
		t.Fatal(err)
	}
	refused("last")

	if got, err := admin.HGet(ctx, b.keys.meta(), "token").Result(); err != nil || got != "9007199254740991" {
		t.Errorf("token counter %q, %v after the refusals; want 9007199254740991 (2^53-1), unchanged", got, err)
	}
	held, _, err := s.Owned(ctx)
	if err != nil {
		t.Fatalf("Owned after the refusals: %v; want the session alive", err)
	}
	if len(held) != 0 {
		t.Errorf("the session holds %v after the refusals; want nothing", held)
	}
}

// Open takes the backend's options from the URL's query, refuses a URL that
// names no host (go-redis would dial localhost), and never shows a password,
// whatever characters it holds.
func TestOpenURLOptions(t *testing.T) {
	addr, admin := sharedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := uniquePrefix()
	b, err := Open(ctx, "redis://"+addr+"/0?simba_prefix="+prefix+"&simba_max_lease=7s&client_name=simba-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteKeys(t, admin, newLayout(prefix)) })
	defer b.Close()
	if b.Prefix() != prefix || b.MaxLease() != 7*time.Second {
		t.Errorf("Open with simba_prefix and simba_max_lease: prefix %q, max lease %v; want %q and 7s", b.Prefix(), b.MaxLease(), prefix)
	}
	if o := b.client.(*redis.Client).Options(); o.ClientName != "simba-test" || o.DialerRetries != 1 {
		t.Errorf("client options: name %q, dialer retries %d; want go-redis's own option kept and 1 retry", o.ClientName, o.DialerRetries)
	}
	for _, raw := range []string{
		"redis://",
		"redis:///0",
		"redis://:pa/ss@127.0.0.1:1/0",
		"redis://user:pa#ss@127.0.0.1:1/0",
		"redis://:pa@ss@/0",
		"redis://" + addr + "/0?simba_max_lease=soon&password=pa55",
	} {
		b, err := Open(ctx, raw)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) = nil error; want one", redact.URL(raw))
			continue
		}
		for _, secret := range []string{"pa/ss", "pa#ss", "pa@ss", "pa55", "ss@"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open error %q shows the password", err)
			}
		}
	}
}

// A read-only backend writes nothing: opening it creates no key (not even
// the namespace's meta hash), it lists the namespace, and it opens no
// session.
func TestReadOnly(t *testing.T) {
	addr, admin := sharedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := uniquePrefix()
	b, err := Open(ctx, "redis://"+addr+"/0?simba_prefix="+prefix, WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Inspect(ctx); err != nil {
		t.Errorf("Inspect of a read-only backend: %v", err)
	}
	if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("OpenSession of a read-only backend = %v; want ErrReadOnly", err)
	}
	if keys, err := admin.Keys(ctx, newLayout(prefix).pattern()).Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys of the namespace after a read-only open and listing: %v, %v; want none", keys, err)
	}
}

// The meta hash is a hash table, not a listpack, from its first write on:
// its about field is longer than a listpack takes (see metaAbout).
func TestMetaHashTable(t *testing.T) {
	if len(metaAbout) <= 64 {
		t.Errorf("metaAbout is %d bytes; want more than 64 (hash-max-listpack-value)", len(metaAbout))
	}
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx := context.Background()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if enc, err := admin.ObjectEncoding(ctx, b.keys.meta()).Result(); err != nil || enc != "hashtable" {
		t.Errorf("OBJECT ENCODING of the meta hash = %q, %v; want hashtable", enc, err)
	}
	if about, err := admin.HGet(ctx, b.keys.meta(), "about").Result(); err != nil || about != metaAbout {
		t.Errorf("the meta hash's about = %q, %v; want %q", about, err, metaAbout)
	}
}
