package backendtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/simba-go/simba/backends"
)

// The batch cases run on stores whose sessions implement
// backends.BatchSession, and are skipped elsewhere, even under RequireEnv:
// the interface is an optional speed-up, never a duty.

// batchSession returns s as a BatchSession, or skips the case.
func batchSession(t *testing.T, s backends.Session) backends.BatchSession {
	t.Helper()
	bs, ok := s.(backends.BatchSession)
	if !ok {
		t.Skipf("sessions (%T) do not implement backends.BatchSession", s)
	}
	return bs
}

// batchNames are the names of the batch cases' acquire batch, each prefixed,
// which a session holding "mine" and another session holding "theirs" make:
// free names, one held by another session, one held by the batch's session,
// one given twice, and an invalid one.
var batchNames = []string{"free-1", "theirs", "mine", "free-2", "free-1", ""}

// §12, T2, T5, S1: a batch's results are what as many Acquire (Release)
// calls one after the other would have given: a grant or ErrLeaseHeld per
// name, the same token for a name held already or given twice, tokens
// strictly increasing per name, and each grant's digest right after its own
// acquisition — the same leases and version steps as the single calls of a
// twin pair of sessions make; Owned then lists what the batch acquired.
// Releases likewise: only the leases held with their token are freed.
func testBatch(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	ab := batchSession(t, a)
	ra, _ := e.open() // a and b's twins, making single calls
	rb, _ := e.open()

	if rs, err := ab.AcquireBatch(e.ctx, nil); err != nil || len(rs) != 0 {
		t.Errorf("AcquireBatch of no names = %v, %v; want no results and no error", rs, err)
	}
	theirs := e.acquire(b, "theirs")
	mine := e.acquire(a, "mine")
	e.acquire(rb, "ref-theirs")
	refMine := e.acquire(ra, "ref-mine")

	base, refBase := e.keepAlive(a).Digest, e.keepAlive(ra).Digest
	rs, err := ab.AcquireBatch(e.ctx, batchNames)
	if err != nil {
		t.Fatalf("AcquireBatch(%q): %v", batchNames, err)
	}
	if len(rs) != len(batchNames) {
		t.Fatalf("AcquireBatch(%q): %d results; want one per name", batchNames, len(rs))
	}
	for i, name := range batchNames {
		ref := name
		if name != "" {
			ref = "ref-" + name
		}
		g, err := ra.Acquire(e.ctx, ref)
		r := rs[i]
		what := fmt.Sprintf("AcquireBatch result %d (%q)", i, name)
		switch {
		case (r.Err == nil) != (err == nil) || errors.Is(r.Err, backends.ErrLeaseHeld) != errors.Is(err, backends.ErrLeaseHeld):
			t.Errorf("%s: error %v; a single Acquire gave %v", what, r.Err, err)
			continue
		case r.Err != nil:
			continue
		case r.Grant.Digest.Leases != g.Digest.Leases || r.Grant.Digest.Version-base.Version != g.Digest.Version-refBase.Version:
			t.Errorf("%s: digest %+v from %+v; a single Acquire went to %+v from %+v", what, r.Grant.Digest, base, g.Digest, refBase)
		}
	}
	// The single calls' results are the contract's; check the batch's own.
	held := rs[1].Err
	var he *backends.HeldError
	if !errors.As(held, &he) || he.Holder.Session != b.ID() || he.Holder.Token != theirs.Token {
		t.Errorf("AcquireBatch of a name held by session %s with token %d: %v; want a *HeldError naming them", b.ID(), theirs.Token, held)
	}
	if rs[0].Err != nil || rs[2].Err != nil || rs[3].Err != nil || rs[4].Err != nil {
		t.Fatalf("AcquireBatch(%q) = %+v; want grants of the free names and of the one held already", batchNames, rs)
	}
	if rs[5].Err == nil {
		t.Errorf("AcquireBatch of an invalid name granted it: %+v", rs[5].Grant)
	}
	free1, free2 := rs[0].Grant.Token, rs[3].Grant.Token
	switch {
	case rs[2].Grant.Token != mine.Token:
		t.Errorf("AcquireBatch of a name the session holds: token %d; want its own, %d", rs[2].Grant.Token, mine.Token)
	case rs[4].Grant.Token != free1:
		t.Errorf("AcquireBatch of a name given twice: tokens %d and %d; want one", free1, rs[4].Grant.Token)
	case free1 <= mine.Token || free2 <= free1:
		t.Errorf("AcquireBatch tokens %d, %d after %d; want them increasing across the store's grants (T2)", free1, free2, mine.Token)
	}
	want := []backends.Held{{Name: "free-1", Token: free1}, {Name: "free-2", Token: free2}, {Name: "mine", Token: mine.Token}}
	if got, _ := e.owned(a); !slices.Equal(got, want) {
		t.Errorf("Owned after the batch = %v; want %v", got, want)
	}

	// Releases: held with the token, another's, a wrong token, released
	// twice.
	leases := []backends.Held{
		{Name: "free-1", Token: free1}, {Name: "theirs", Token: theirs.Token}, {Name: "mine", Token: mine.Token + 1},
		{Name: "free-2", Token: free2}, {Name: "free-1", Token: free1},
	}
	refTokens := map[string]backends.Token{"mine": refMine.Token}
	owned, _ := e.owned(ra)
	for _, o := range owned {
		refTokens[o.Name[len("ref-"):]] = o.Token
	}
	base, refBase = e.keepAlive(a).Digest, e.keepAlive(ra).Digest
	rr, err := ab.ReleaseBatch(e.ctx, leases)
	if err != nil || len(rr) != len(leases) {
		t.Fatalf("ReleaseBatch(%v) = %v, %v; want one result per lease", leases, rr, err)
	}
	for i, l := range leases {
		tok := l.Token
		if l.Name == "mine" {
			tok = refTokens["mine"] + 1
		} else if rt, ok := refTokens[l.Name]; ok {
			tok = rt
		}
		d, err := ra.Release(e.ctx, "ref-"+l.Name, tok)
		r := rr[i]
		if (r.Err == nil) != (err == nil) {
			t.Errorf("ReleaseBatch result %d (%v): error %v; a single Release gave %v", i, l, r.Err, err)
			continue
		}
		if r.Err == nil && (r.Digest.Leases != d.Leases || r.Digest.Version-base.Version != d.Version-refBase.Version) {
			t.Errorf("ReleaseBatch result %d (%v): digest %+v from %+v; a single Release went to %+v from %+v", i, l, r.Digest, base, d, refBase)
		}
	}
	want = []backends.Held{{Name: "mine", Token: mine.Token}}
	if got, _ := e.owned(a); !slices.Equal(got, want) {
		t.Errorf("Owned after the release batch = %v; want %v", got, want)
	}
	e.wantHeldBy(b, a, "theirs", theirs.Token)

	// A new term of a released name has a larger token (T2).
	rs, err = ab.AcquireBatch(e.ctx, []string{"free-1"})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].Grant.Token <= free2 {
		t.Errorf("AcquireBatch of a released name = %+v, %v; want a grant with a token above %d (T2)", rs, err, free2)
	}
}

// S3, S4: a closed session's batches acquire and release nothing: the call,
// or each of its results, fails with ErrSessionExpired.
func testBatchClosedSession(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	ab := batchSession(t, a)
	g := e.acquire(a, "lease")
	if err := a.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rs, err := ab.AcquireBatch(e.ctx, []string{"lease", "other"})
	if err == nil {
		for i, r := range rs {
			if !errors.Is(r.Err, backends.ErrSessionExpired) {
				t.Errorf("AcquireBatch by a closed session, result %d: %+v; want ErrSessionExpired", i, r)
			}
		}
	} else if !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("AcquireBatch by a closed session = %v; want ErrSessionExpired", err)
	}
	rr, err := ab.ReleaseBatch(e.ctx, []backends.Held{{Name: "lease", Token: g.Token}})
	if err == nil {
		for i, r := range rr {
			if !errors.Is(r.Err, backends.ErrSessionExpired) {
				t.Errorf("ReleaseBatch by a closed session, result %d: %+v; want ErrSessionExpired", i, r)
			}
		}
	} else if !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("ReleaseBatch by a closed session = %v; want ErrSessionExpired", err)
	}
	if h, err := b.Holder(e.ctx, "other"); err != nil || !h.Free() {
		t.Errorf("Holder(\"other\") after a closed session's batch = %+v, %v; want free", h, err)
	}
}
