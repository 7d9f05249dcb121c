package backendtest

import (
	"testing"

	"github.com/simba-go/simba/backends"
)

// S1, §12 (the digest): the replies to Acquire and Release carry the
// session's digest right after their own change, the one the next keep-alive
// reports; Version goes up by exactly one per lease acquired or released, and
// not at all for a no-op (a re-acquisition, a release without the term). A
// node can so follow its own changes without reading Owned.
func testDigestInReplies(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, r := e.open()
	b, _ := e.open()
	d := r.Digest
	check := func(what string, got backends.Digest, leases int, bump uint64) {
		t.Helper()
		if got.Leases != leases || got.Version != d.Version+bump {
			t.Errorf("%s: reply digest %+v; want %d leases and version %d (the last, %d, plus %d)",
				what, got, leases, d.Version+bump, d.Version, bump)
		}
		if ka := e.keepAlive(a).Digest; ka != got {
			t.Errorf("%s: reply digest %+v; the next keep-alive says %+v; want them equal", what, got, ka)
		}
		d = got
	}
	gx := e.acquire(a, "x")
	check("acquiring x", gx.Digest, 1, 1)
	gy := e.acquire(a, "y")
	check("acquiring y", gy.Digest, 2, 1)
	check("re-acquiring y", e.acquire(a, "y").Digest, 2, 0)
	check("releasing y with a wrong token", e.release(a, "y", gy.Token+1), 2, 0)
	gz := e.acquire(b, "z")
	check("another session's release", e.keepAlive(a).Digest, 2, 0)
	e.release(b, "z", gz.Token)
	check("releasing x", e.release(a, "x", gx.Token), 1, 1)
	check("releasing x again", e.release(a, "x", gx.Token), 1, 0)
	check("releasing a lease never held", e.release(a, "z", gz.Token), 1, 0)
	check("releasing y", e.release(a, "y", gy.Token), 0, 1)
	gw := e.acquire(a, backends.PartitionName("group", 0))
	check("acquiring a partition", gw.Digest, 1, 1)
}
