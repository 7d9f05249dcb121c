package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/simba-go/simba/backends"
)

// T2, F5: tokens are > 0 and strictly increasing across the terms of one name,
// whichever session wins them, and — one counter per store — across names.
func testTokensIncrease(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	var last backends.Token
	for i := range 6 {
		s := a
		if i%2 == 1 {
			s = b
		}
		name := "lease"
		if i >= 4 {
			name = fmt.Sprintf("other-%d", i)
		}
		g := e.acquire(s, name)
		if g.Token <= last {
			t.Errorf("term %d (%q): token %d; want > %d, the previous term's (T2, F5)", i, name, g.Token, last)
		}
		last = g.Token
		e.release(s, name, g.Token)
	}
}

// §12: re-acquiring a lease the session holds returns the same token and
// changes nothing.
func testAcquireIdempotent(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	g := e.acquire(a, "lease")
	d := e.keepAlive(a).Digest
	for range 2 {
		if g2 := e.acquire(a, "lease"); g2.Token != g.Token {
			t.Errorf("second Acquire by the holder: token %d; want the same %d", g2.Token, g.Token)
		}
	}
	if d2 := e.keepAlive(a).Digest; d2 != d {
		t.Errorf("digest after re-acquiring = %+v; want %+v unchanged", d2, d)
	}
	held, _ := e.owned(a)
	if want := []backends.Held{{Name: "lease", Token: g.Token}}; !slices.Equal(held, want) {
		t.Errorf("Owned = %v; want %v", held, want)
	}
}

// §12: a lease held by another live session is refused with ErrLeaseHeld and
// stays with its holder.
func testAcquireHeld(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	g := e.acquire(a, "lease")
	_, err := b.Acquire(e.ctx, "lease")
	wantErr(t, err, backends.ErrLeaseHeld, "Acquire of a held lease")
	if errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("Acquire of a held lease = %v; the acquiring session is live", err)
	}
	e.wantHeldBy(a, b, "lease", g.Token)
	if held, _ := e.owned(b); len(held) != 0 {
		t.Errorf("the refused session owns %v; want nothing", held)
	}
}

// T1, §12: of many sessions acquiring one free lease at once, exactly one wins;
// the others get ErrLeaseHeld.
func testConcurrentAcquire(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	const n = 16
	sessions := make([]backends.Session, n)
	for i := range sessions {
		sessions[i], _ = e.open()
	}
	grants := make([]backends.Grant, n)
	errs := make([]error, n)
	concurrently(n, func(i int) {
		grants[i], errs[i] = sessions[i].Acquire(e.ctx, "lease")
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("sessions %d and %d both acquired the lease", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, backends.ErrLeaseHeld):
			t.Errorf("session %d: Acquire = %v; want success or ErrLeaseHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no session acquired the free lease")
	}
	other := sessions[(winner+1)%n]
	e.wantHeldBy(sessions[winner], other, "lease", grants[winner].Token)
}

// T5: Release is a no-op unless the session holds the lease with that very
// token: a wrong token, another session's release, or a late release of an
// ended term leave the lease where it is.
func testReleaseNeedsHolderAndToken(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	g := e.acquire(a, "lease")
	e.release(a, "lease", g.Token-1)
	e.release(a, "lease", g.Token+1)
	e.release(b, "lease", g.Token)
	e.release(b, "never-held", 1)
	e.wantHeldBy(a, b, "lease", g.Token)

	e.release(a, "lease", g.Token)
	if e.holds(a, "lease", g.Token) {
		t.Fatal("the holder's release with its token did not release the lease")
	}
	gb := e.acquire(b, "lease")
	e.release(a, "lease", g.Token) // a late release of the ended term
	e.wantHeldBy(b, a, "lease", gb.Token)
	e.release(b, "lease", gb.Token)
	e.release(b, "lease", gb.Token) // releasing twice is fine
}

// S1, T4: the keep-alive digest changes whenever the set of leases held
// changes and is stable otherwise (including when other sessions act); Owned
// lists exactly the leases held, with their tokens, and the digest of the
// same instant.
func testDigest(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, r := e.open()
	b, _ := e.open()
	d := r.Digest
	step := func(what string, wantChange bool, want []backends.Held) {
		t.Helper()
		d2 := e.keepAlive(a).Digest
		switch {
		case wantChange && d2 == d:
			t.Errorf("after %s: digest %+v unchanged; want a change (T4)", what, d2)
		case !wantChange && d2 != d:
			t.Errorf("after %s: digest %+v; want %+v unchanged", what, d2, d)
		}
		if d2.Leases != len(want) {
			t.Errorf("after %s: digest counts %d leases; want %d", what, d2.Leases, len(want))
		}
		held, od := e.owned(a)
		if !slices.Equal(held, want) {
			t.Errorf("after %s: Owned = %v; want %v", what, held, want)
		}
		if od != d2 {
			t.Errorf("after %s: Owned digest %+v; want the keep-alive's %+v", what, od, d2)
		}
		d = d2
	}
	step("nothing", false, nil)
	gx := e.acquire(a, "x")
	step("acquiring x", true, []backends.Held{{Name: "x", Token: gx.Token}})
	gy := e.acquire(a, "y")
	both := []backends.Held{{Name: "x", Token: gx.Token}, {Name: "y", Token: gy.Token}}
	step("acquiring y", true, both)
	e.acquire(a, "y")
	step("re-acquiring y", false, both)
	gz := e.acquire(b, "z")
	e.release(b, "x", gx.Token)
	e.release(a, "x", gx.Token+1)
	step("other sessions' and stale calls", false, both)
	e.release(a, "x", gx.Token)
	step("releasing x", true, []backends.Held{{Name: "y", Token: gy.Token}})
	// Same count, different set: the version must tell.
	e.release(a, "y", gy.Token)
	gy = e.acquire(a, "w")
	step("swapping y for w", true, []backends.Held{{Name: "w", Token: gy.Token}})
	e.release(b, "z", gz.Token)
	step("another session's release", false, []backends.Held{{Name: "w", Token: gy.Token}})
	e.release(a, "w", gy.Token)
	step("releasing w", true, nil)
}

// §12: a value is written only by the holder with its token (ErrNotHolder
// otherwise), outlives the term, and is returned by the next Acquire of the
// name, by any session; the store keeps its own copy.
func testValues(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	g := e.acquire(a, "lease")
	if g.Value != nil {
		t.Errorf("first Acquire: value %q; want nil, none was stored", g.Value)
	}
	buf := []byte("slot 41")
	if err := a.PutValue(e.ctx, "lease", g.Token, buf); err != nil {
		t.Fatalf("PutValue by the holder: %v", err)
	}
	copy(buf, "XXXX") // the store must have kept its own copy
	wantErr(t, b.PutValue(e.ctx, "lease", g.Token, []byte("b")), backends.ErrNotHolder, "PutValue by another session")
	wantErr(t, a.PutValue(e.ctx, "lease", g.Token+1, []byte("a")), backends.ErrNotHolder, "PutValue with a wrong token")
	wantErr(t, a.PutValue(e.ctx, "unheld", g.Token, []byte("a")), backends.ErrNotHolder, "PutValue of a lease not held")
	if g2 := e.acquire(a, "lease"); string(g2.Value) != "slot 41" {
		t.Errorf("re-Acquire by the holder: value %q; want %q", g2.Value, "slot 41")
	}
	e.release(a, "lease", g.Token)
	wantErr(t, a.PutValue(e.ctx, "lease", g.Token, []byte("late")), backends.ErrNotHolder, "PutValue after release")

	gb := e.acquire(b, "lease")
	if string(gb.Value) != "slot 41" {
		t.Errorf("Acquire by the next holder: value %q; want %q (values outlive terms)", gb.Value, "slot 41")
	}
	if err := b.PutValue(e.ctx, "lease", gb.Token, []byte{}); err != nil {
		t.Fatalf("PutValue of an empty value: %v", err)
	}
	e.release(b, "lease", gb.Token)
	if g3 := e.acquire(a, "lease"); len(g3.Value) != 0 {
		t.Errorf("Acquire after an empty value was stored: %q; want it empty", g3.Value)
	}
	if g4 := e.acquire(b, "fresh"); g4.Value != nil {
		t.Errorf("Acquire of another name: value %q; want nil", g4.Value)
	}
}

// §12: values up to MaxValueSize bytes are stored whole; larger ones are
// refused with ErrValueTooLarge and change nothing.
func testValueSize(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	g := e.acquire(a, "lease")
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, backends.MaxValueSize/4)
	if err := a.PutValue(e.ctx, "lease", g.Token, big); err != nil {
		t.Fatalf("PutValue of %d bytes: %v", len(big), err)
	}
	tooBig := make([]byte, backends.MaxValueSize+1)
	wantErr(t, a.PutValue(e.ctx, "lease", g.Token, tooBig), backends.ErrValueTooLarge, "PutValue of MaxValueSize+1 bytes")
	e.release(a, "lease", g.Token)
	if gb := e.acquire(b, "lease"); !bytes.Equal(gb.Value, big) {
		t.Errorf("value read back: %d bytes; want the %d bytes stored, unchanged", len(gb.Value), len(big))
	}
}
