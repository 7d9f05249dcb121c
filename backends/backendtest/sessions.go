package backendtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// S1, D1, C2: OpenSession grants a positive time to live no longer than asked;
// KeepAlive, one call, answers with the store-measured remaining time, which
// never exceeds what was granted, and a digest that is stable while nothing
// changes.
func testOpenSession(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	s, r := e.open()
	if s.ID() == "" {
		t.Error("ID() is empty; want a session id (S2)")
	}
	if r.Remaining <= 0 || r.Remaining > h.TTL {
		t.Errorf("OpenSession(%v) granted %v; want 0 < granted ≤ %v (C2)", h.TTL, r.Remaining, h.TTL)
	}
	if r.Digest.Leases != 0 {
		t.Errorf("OpenSession digest = %+v; want 0 leases", r.Digest)
	}
	for i := range 3 {
		r2 := e.keepAlive(s)
		if r2.Remaining <= 0 || r2.Remaining > r.Remaining {
			t.Errorf("KeepAlive #%d: remaining %v; want 0 < remaining ≤ granted %v (D1)", i, r2.Remaining, r.Remaining)
		}
		if r2.Digest != r.Digest {
			t.Errorf("KeepAlive #%d: digest %+v; want %+v as at open, since nothing changed (S1)", i, r2.Digest, r.Digest)
		}
	}
	held, d := e.owned(s)
	if len(held) != 0 || d != r.Digest {
		t.Errorf("Owned = %v, %+v; want nothing and the digest %+v", held, d, r.Digest)
	}
}

// C2, §15: a store that clamps time to live grants at most its maximum and
// says so in the reply; every store grants no more than asked.
func testTTLClamp(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	const ask = 24 * time.Hour
	s, r := e.openTTL(ask)
	if r.Remaining <= 0 || r.Remaining > ask {
		t.Errorf("OpenSession(%v) granted %v; want 0 < granted ≤ %v", ask, r.Remaining, ask)
	}
	if h.MaxLease > 0 && r.Remaining > h.MaxLease {
		t.Errorf("OpenSession(%v) granted %v; want it clamped to MaxLease %v (C2)", ask, r.Remaining, h.MaxLease)
	}
	if r2 := e.keepAlive(s); r2.Remaining > r.Remaining {
		t.Errorf("KeepAlive remaining %v; want ≤ granted %v", r2.Remaining, r.Remaining)
	}
}

// S1: a session kept alive outlives its time to live many times over, and
// keeps its leases.
func testKeepAliveExtends(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, r := e.open()
	b, _ := e.open()
	g := e.acquire(a, "lease")
	end := time.Now().Add(2*r.Remaining + h.ExpiryGrace)
	for time.Now().Before(end) {
		e.sleep(r.Remaining/4, b)
		r2 := e.keepAlive(a)
		if r2.Remaining < r.Remaining/2 {
			t.Errorf("KeepAlive remaining %v; want close to the granted %v", r2.Remaining, r.Remaining)
		}
	}
	e.wantHeldBy(a, b, "lease", g.Token)
}

// S2: session ids are unique, even when sessions open concurrently.
func testUniqueSessionIDs(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	const n = 32
	var (
		mu   sync.Mutex
		ids  []backends.SessionID
		errs []error
	)
	concurrently(n, func(int) {
		s, _, err := e.b.OpenSession(e.ctx, backends.SessionOptions{TTL: h.TTL})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		ids = append(ids, s.ID())
		t.Cleanup(func() { closeQuietly(s) })
	})
	if len(errs) > 0 {
		t.Fatalf("OpenSession: %v", errors.Join(errs...))
	}
	// A session opened after one closed gets a new id too.
	s, _ := e.open()
	if err := s.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, _ := e.open()
	ids = append(ids, s.ID(), s2.ID())
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Errorf("session id %q given to two sessions (S2)", ids[i])
		}
	}
	if slices.Contains(ids, "") {
		t.Error("a session has an empty id")
	}
}

// S3, T2, F5: a session that is not kept alive expires; another session can
// then take its lease, with a greater token and the value left behind; the
// expired session never comes back — every call fails with ErrSessionExpired,
// and none of them can touch what the other session now holds.
func testExpiredSessionNeverRevives(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	ga := e.acquire(a, "lease")
	if err := a.PutValue(e.ctx, "lease", ga.Token, []byte("left by a")); err != nil {
		t.Fatalf("PutValue: %v", err)
	}
	sentAt := time.Now()
	r := e.keepAlive(a)
	e.waitExpired(sentAt, r)
	// The first call to the store after the expiry is the late keep-alive
	// itself: a store that expires lazily must still refuse it.
	_, err := a.KeepAlive(e.ctx)
	wantErr(t, err, backends.ErrSessionExpired, "late KeepAlive of the expired session")

	b, _ := e.open()
	var gb backends.Grant
	ok := e.eventually(h.ExpiryGrace, func() bool {
		var err error
		gb, err = b.Acquire(e.ctx, "lease")
		return err == nil
	}, b)
	if !ok {
		t.Fatalf("Acquire by another session still fails %v after the holder's session should have expired", r.Remaining+2*h.ExpiryGrace)
	}
	if gb.Token <= ga.Token {
		t.Errorf("token after expiry takeover = %d; want > %d, the expired holder's (T2, F5)", gb.Token, ga.Token)
	}
	if string(gb.Value) != "left by a" {
		t.Errorf("value after expiry takeover = %q; want %q (values outlive terms)", gb.Value, "left by a")
	}

	_, err = a.KeepAlive(e.ctx)
	wantErr(t, err, backends.ErrSessionExpired, "second KeepAlive of the expired session (S3: it never comes back)")
	_, err = a.Acquire(e.ctx, "lease")
	wantErr(t, err, backends.ErrSessionExpired, "Acquire of the taken lease by the expired session")
	_, err = a.Acquire(e.ctx, "free")
	wantErr(t, err, backends.ErrSessionExpired, "Acquire of a free lease by the expired session")
	_, err = a.Release(e.ctx, "lease", gb.Token)
	wantErr(t, err, backends.ErrSessionExpired, "Release by the expired session")
	_, err = a.Release(e.ctx, "lease", ga.Token)
	wantErr(t, err, backends.ErrSessionExpired, "Release of its old term by the expired session")
	err = a.PutValue(e.ctx, "lease", ga.Token, []byte("stale"))
	wantErr(t, err, backends.ErrSessionExpired, "PutValue by the expired session")
	_, _, err = a.Owned(e.ctx)
	wantErr(t, err, backends.ErrSessionExpired, "Owned of the expired session")
	err = a.Join(e.ctx, "group", 2)
	wantErr(t, err, backends.ErrSessionExpired, "Join by the expired session")
	if err := a.Close(e.ctx); err != nil {
		t.Errorf("Close of the expired session = %v; want nil", err)
	}

	e.wantHeldBy(b, e.mustOpen(), "lease", gb.Token)
	if g := e.acquire(b, "lease"); string(g.Value) != "left by a" {
		t.Errorf("value after the expired session's PutValue = %q; want %q unchanged", g.Value, "left by a")
	}
}

// S3, S4: a session that the store expired behind its client's back gets
// ErrSessionExpired, and its leases and memberships are gone at once.
func testExpireSessionBehindBack(t *testing.T, h *Harness) {
	if h.ExpireSession == nil {
		lacking(t, "Harness.ExpireSession is nil")
	}
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	ga := e.acquire(a, "lease")
	e.join(a, "group", 2)
	h.ExpireSession(t, e.b, a.ID())

	_, err := a.KeepAlive(e.ctx)
	wantErr(t, err, backends.ErrSessionExpired, "KeepAlive after ExpireSession")
	_, err = a.Acquire(e.ctx, "other")
	wantErr(t, err, backends.ErrSessionExpired, "Acquire after ExpireSession")
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("Acquire by another session after ExpireSession: %v", err)
	}
	if gb.Token <= ga.Token {
		t.Errorf("token after takeover = %d; want > %d (T2)", gb.Token, ga.Token)
	}
	if v := e.members(b, "group"); len(v.Members) != 0 {
		t.Errorf("members after the only member expired = %v; want none", v.Members)
	}
}

// S4: Close releases every lease and ends every membership at once; the
// closed session's calls fail with ErrSessionExpired, and closing again is
// fine. (Close waking watchers is checked by Notify.)
func testCloseReleasesEverything(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	names := []string{"one", "two", backends.PartitionName("group", 0)}
	tokens := make(map[string]backends.Token)
	for _, n := range names {
		tokens[n] = e.acquire(a, n).Token
	}
	e.join(a, "group", 2)
	e.join(b, "group", 2)

	if err := a.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, n := range names {
		g, err := b.Acquire(e.ctx, n)
		if err != nil {
			t.Errorf("Acquire(%q) right after its holder closed: %v; want the lease free (S4)", n, err)
			continue
		}
		if g.Token <= tokens[n] {
			t.Errorf("Acquire(%q) after close: token %d; want > %d", n, g.Token, tokens[n])
		}
	}
	v := e.members(b, "group")
	if !slices.Equal(v.Members, []backends.SessionID{b.ID()}) {
		t.Errorf("members after a closed = %v; want only %s", v.Members, b.ID())
	}
	if v.Partitions == 2 && v.Holders[0] != b.ID() {
		t.Errorf("holder of partition 0 = %q; want %s", v.Holders[0], b.ID())
	}
	_, err := a.KeepAlive(e.ctx)
	wantErr(t, err, backends.ErrSessionExpired, "KeepAlive after Close")
	_, err = a.Acquire(e.ctx, "three")
	wantErr(t, err, backends.ErrSessionExpired, "Acquire after Close")
	_, err = a.Members(e.ctx, "group")
	wantErr(t, err, backends.ErrSessionExpired, "Members after Close")
	if err := a.Close(e.ctx); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

// mustOpen opens a fresh session, a third party for checks.
func (e *env) mustOpen() backends.Session {
	e.t.Helper()
	s, _ := e.open()
	return s
}

func closeQuietly(s backends.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
