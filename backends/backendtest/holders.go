package backendtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// §12 (who holds a lease): any session reads the holder of any lease — its
// session, the identity it was opened with, its token — and a refused
// Acquire says the same in a *backends.HeldError, with the holder's
// remaining time as the store measured it; a released lease, or one whose
// holder closed, reads as free.
func testHolder(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.openAs(backends.SessionOptions{TTL: h.TTL, Identity: "host-a:4242 (pod billing-7f9)"})
	b, _ := e.openAs(backends.SessionOptions{TTL: h.TTL})
	c, _ := e.open()

	holder := func(s backends.Session, name string) backends.Holder {
		t.Helper()
		got, err := s.Holder(e.ctx, name)
		if err != nil {
			t.Fatalf("Holder(%q) by session %s: %v", name, s.ID(), err)
		}
		return got
	}
	if got := holder(c, "lease"); got != (backends.Holder{}) || !got.Free() {
		t.Errorf("Holder of a lease never acquired = %+v; want the zero Holder (free)", got)
	}
	g := e.acquire(a, "lease")
	for _, s := range []backends.Session{a, b, c} {
		got := holder(s, "lease")
		if got.Session != a.ID() || got.Identity != "host-a:4242 (pod billing-7f9)" || got.Token != g.Token || got.Free() {
			t.Errorf("Holder read by session %s = %+v; want session %s, its identity and token %d", s.ID(), got, a.ID(), g.Token)
		}
		if got.Remaining < 0 || got.Remaining > h.TTL {
			t.Errorf("Holder.Remaining = %v; want 0 (not measured) or in (0, %v]", got.Remaining, h.TTL)
		}
	}

	_, err := b.Acquire(e.ctx, "lease")
	var he *backends.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("Acquire of a held lease = %v; want a *backends.HeldError", err)
	}
	if !errors.Is(err, backends.ErrLeaseHeld) {
		t.Errorf("Acquire of a held lease = %v; want it to match ErrLeaseHeld", err)
	}
	if he.Name != "lease" || he.Holder.Session != a.ID() || he.Holder.Token != g.Token ||
		he.Holder.Identity != "host-a:4242 (pod billing-7f9)" {
		t.Errorf("HeldError = %+v; want name %q, holder %s with token %d and its identity", he, "lease", a.ID(), g.Token)
	}
	if he.Holder.Remaining < 0 || he.Holder.Remaining > h.TTL {
		t.Errorf("HeldError.Holder.Remaining = %v; want 0 (not measured) or in (0, %v]", he.Holder.Remaining, h.TTL)
	}
	if msg := err.Error(); !strings.Contains(msg, string(a.ID())) || !strings.Contains(msg, "host-a:4242") {
		t.Errorf("HeldError message %q; want it to name the holder's session and identity", msg)
	}

	// A session opened without an identity is reported without one.
	gb := e.acquire(b, "other")
	if got := holder(a, "other"); got.Session != b.ID() || got.Identity != "" || got.Token != gb.Token {
		t.Errorf("Holder of a lease held by a session without identity = %+v; want session %s, no identity, token %d", got, b.ID(), gb.Token)
	}

	e.release(a, "lease", g.Token)
	if got := holder(c, "lease"); !got.Free() {
		t.Errorf("Holder after the release = %+v; want free", got)
	}
	if err := b.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := holder(c, "other"); !got.Free() {
		t.Errorf("Holder after the holder closed = %+v; want free (S4)", got)
	}
}

// §12: a session identity that breaks backends.ValidateIdentity is refused
// by OpenSession with ErrInvalidIdentity, and so is a TTL ≤ 0.
func testInvalidSessionOptions(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	for _, id := range []string{"line\nbreak", "nul\x00", "\xff\xfe", strings.Repeat("x", backends.MaxIdentityLen+1)} {
		s, _, err := e.b.OpenSession(e.ctx, backends.SessionOptions{TTL: h.TTL, Identity: id})
		if err == nil {
			closeQuietly(s)
		}
		wantErr(t, err, backends.ErrInvalidIdentity, "OpenSession with identity %q", id)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		s, _, err := e.b.OpenSession(e.ctx, backends.SessionOptions{TTL: ttl})
		if err == nil {
			closeQuietly(s)
			t.Errorf("OpenSession with TTL %v = nil; want an error", ttl)
		}
	}
	long := strings.Repeat("é", backends.MaxIdentityLen/2) // exactly the limit, in bytes
	s, _ := e.openAs(backends.SessionOptions{TTL: h.TTL, Identity: long})
	e.acquire(s, "lease")
	if got, err := s.Holder(e.ctx, "lease"); err != nil || got.Identity != long {
		t.Errorf("Holder of a lease held by a session with a %d-byte identity = %+v, %v; want the identity whole", len(long), got, err)
	}
}

// §12 (Inspector): a backend that lists its store reports the live sessions
// with their identities and lease counts, the held leases with their holders,
// tokens and values, and the groups with their members — and nothing of
// sessions that closed. Skipped unless the backend implements
// backends.Inspector.
func testInspect(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	in, ok := e.b.(backends.Inspector)
	if !ok {
		lacking(t, fmt.Sprintf("backend (%T) does not implement backends.Inspector", e.b))
	}
	a, _ := e.openAs(backends.SessionOptions{TTL: h.TTL, Identity: "node a"})
	b, _ := e.openAs(backends.SessionOptions{TTL: h.TTL, Identity: "node b"})
	gone, _ := e.openAs(backends.SessionOptions{TTL: h.TTL, Identity: "node gone"})
	ga := e.acquire(a, "report")
	if err := a.PutValue(e.ctx, "report", ga.Token, []byte("slot 7")); err != nil {
		t.Fatalf("PutValue: %v", err)
	}
	p1 := e.acquire(b, backends.PartitionName("billing", 1))
	e.join(a, "billing", 2)
	e.join(b, "billing", 2)
	e.acquire(gone, "elsewhere")
	if err := gone.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}

	inv, err := in.Inspect(e.ctx)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !slices.IsSortedFunc(inv.Sessions, func(x, y backends.SessionInfo) int { return strings.Compare(string(x.ID), string(y.ID)) }) ||
		!slices.IsSortedFunc(inv.Leases, func(x, y backends.LeaseInfo) int { return strings.Compare(x.Name, y.Name) }) ||
		!slices.IsSortedFunc(inv.Groups, func(x, y backends.GroupInfo) int { return strings.Compare(x.Name, y.Name) }) {
		t.Errorf("Inspect lists are not sorted: %+v", inv)
	}
	byID := make(map[backends.SessionID]backends.SessionInfo)
	for _, s := range inv.Sessions {
		byID[s.ID] = s
	}
	for _, want := range []backends.SessionInfo{{ID: a.ID(), Identity: "node a", Leases: 1}, {ID: b.ID(), Identity: "node b", Leases: 1}} {
		got, ok := byID[want.ID]
		if !ok {
			t.Errorf("Inspect lists sessions %+v; want %s among them", inv.Sessions, want.ID)
			continue
		}
		if got.Identity != want.Identity || got.Leases != want.Leases || got.Remaining < 0 || got.Remaining > h.TTL {
			t.Errorf("Inspect session %s = %+v; want identity %q, %d lease(s), remaining 0 or in (0, %v]",
				want.ID, got, want.Identity, want.Leases, h.TTL)
		}
	}
	if _, ok := byID[gone.ID()]; ok {
		t.Errorf("Inspect lists session %s, which closed", gone.ID())
	}
	wantLeases := []backends.LeaseInfo{
		{Name: backends.PartitionName("billing", 1), Session: b.ID(), Identity: "node b", Token: p1.Token},
		{Name: "report", Session: a.ID(), Identity: "node a", Token: ga.Token, Value: []byte("slot 7")},
	}
	if len(inv.Leases) != len(wantLeases) {
		t.Errorf("Inspect leases = %+v; want %+v", inv.Leases, wantLeases)
	} else {
		for i, want := range wantLeases {
			got := inv.Leases[i]
			if got.Name != want.Name || got.Session != want.Session || got.Identity != want.Identity ||
				got.Token != want.Token || string(got.Value) != string(want.Value) {
				t.Errorf("Inspect lease %d = %+v; want %+v", i, got, want)
			}
		}
	}
	members := []backends.SessionID{a.ID(), b.ID()}
	slices.Sort(members)
	if len(inv.Groups) != 1 || inv.Groups[0].Name != "billing" || inv.Groups[0].Partitions != 2 ||
		!slices.Equal(inv.Groups[0].Members, members) {
		t.Errorf("Inspect groups = %+v; want billing with 2 partitions and members %v", inv.Groups, members)
	}
	if _, ok := e.b.(backends.StoreClock); ok && inv.StoreTime.IsZero() {
		t.Error("Inspect StoreTime is zero for a backend with a StoreClock")
	}
}

// §12 (who holds a lease), backends.HolderNotifier: a session watching a
// lease's holder is told every grant and every end of a term, in the
// store's order, holds shorter than a read included — with a watch that
// is slow to return too — and nothing once its stop returned. Stores
// without the interface skip the case (they hint at releases only, see
// Notify).
func testHolderChanges(t *testing.T, h *Harness) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) {
			e := newEnv(t, h)
			watcher, _ := e.open()
			locker, _ := e.openAs(backends.SessionOptions{TTL: h.TTL, Identity: "locker"})
			hn, ok := watcher.(backends.HolderNotifier)
			if !ok {
				t.Skipf("sessions (%T) do not implement backends.HolderNotifier", watcher)
			}
			var (
				mu  sync.Mutex
				got []string
				bad []string
			)
			stop := hn.WatchHolder("turn", func(bh backends.Holder) {
				mu.Lock()
				defer mu.Unlock()
				if bh.Session == "" {
					got = append(got, fmt.Sprintf("end %d", bh.Token))
				} else {
					got = append(got, fmt.Sprintf("%s %s %d", bh.Session, bh.Identity, bh.Token))
					if bh.Remaining <= 0 || bh.Remaining > h.TTL {
						bad = append(bad, fmt.Sprintf("grant %d told with Remaining %v; want in (0, %v]", bh.Token, bh.Remaining, h.TTL))
					}
				}
				if slow {
					time.Sleep(2 * time.Millisecond)
				}
			})
			defer stop()
			told := func(n int) []string {
				t.Helper()
				for end := time.Now().Add(10 * h.TTL); ; time.Sleep(5 * time.Millisecond) {
					mu.Lock()
					c := slices.Clone(got)
					mu.Unlock()
					if len(c) >= n || time.Now().After(end) {
						return c
					}
				}
			}
			// The watch may start late: a first term, held until it is
			// told, shows that it is in place.
			g := e.acquire(locker, "turn")
			want := []string{fmt.Sprintf("%s locker %d", locker.ID(), g.Token)}
			if c := told(1); !slices.Equal(c, want) {
				t.Fatalf("the watch of a held lease told %q; want %q", c, want)
			}
			e.release(locker, "turn", g.Token)
			want = append(want, fmt.Sprintf("end %d", g.Token))
			for i := range 100 {
				if i%10 == 0 {
					e.keepAlive(locker) // a slow watch may slow the store's calls (memory)
				}
				g := e.acquire(locker, "turn")
				e.release(locker, "turn", g.Token)
				want = append(want, fmt.Sprintf("%s locker %d", locker.ID(), g.Token), fmt.Sprintf("end %d", g.Token))
			}
			c := told(len(want))
			if !slices.Equal(c, want) {
				i := 0
				for i < min(len(c), len(want)) && c[i] == want[i] {
					i++
				}
				t.Fatalf("the watch told %d changes for 101 terms; want %d; first difference at %d: %q, want %q",
					len(c), len(want), i, c[i:min(i+4, len(c))], want[i:min(i+4, len(want))])
			}
			mu.Lock()
			for _, b := range bad {
				t.Error(b)
			}
			mu.Unlock()
			// A session's close ends its term too.
			g = e.acquire(locker, "turn")
			if err := locker.Close(e.ctx); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%s locker %d", locker.ID(), g.Token), fmt.Sprintf("end %d", g.Token))
			if c := told(len(want)); !slices.Equal(c, want) {
				t.Fatalf("after the holder's Close the watch told %q; want it to end with %q", c[max(0, len(c)-2):], want[len(want)-2:])
			}
			stop()
			other, _ := e.open()
			g = e.acquire(other, "turn")
			e.release(other, "turn", g.Token)
			time.Sleep(h.TTL / 4)
			if c := told(0); len(c) != len(want) {
				t.Errorf("the watch told %q after its stop returned; want nothing", c[len(want):])
			}
		})
	}
}
