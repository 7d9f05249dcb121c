package simbamysql

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
)

// withParams returns the shared URL with more driver parameters.
func withParams(t *testing.T, params string) string {
	u := sharedURL(t)
	if strings.Contains(u, "?") {
		return u + "&" + params
	}
	return u + "?" + params
}

// The backend depends on none of the DSN settings a user's pool may have:
// with go-sql-driver's clientFoundRows, interpolateParams, parseTime or
// multiStatements, and with the session time zone moved to +05:00, a session
// on that pool and one on a default pool agree on what every lease means —
// the remaining times and the store's clock are the same, since expiries are
// microseconds since the epoch, never local DATETIMEs.
func TestDSNSettings(t *testing.T) {
	admin := newDB(t, sharedURL(t), nil)
	plain := newBackend(t, newDB(t, sharedURL(t), nil), admin, WithMaxLease(time.Minute))
	ctx := testCtx(t)
	for i, params := range []string{
		"clientFoundRows=true",
		"interpolateParams=true",
		"parseTime=true&loc=Local",
		"multiStatements=true",
		"time_zone=" + url.QueryEscape("'+05:00'"),
		"time_zone=" + url.QueryEscape("'-09:30'") + "&clientFoundRows=true",
	} {
		t.Run(params, func(t *testing.T) {
			db := newDB(t, withParams(t, params), nil)
			b := samePrefix(t, plain, db)
			ttl := 30 * time.Second
			s := mustOpen(t, b, ttl)
			other := mustOpen(t, plain, ttl)
			name := fmt.Sprintf("lease-%d", i)
			g, err := s.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 { // renewals in quick succession: none reads as lost
				r, err := s.KeepAlive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if r.Remaining != ttl || r.Digest.Leases != 1 {
					t.Fatalf("KeepAlive = %v left, %d leases; want %v and 1", r.Remaining, r.Digest.Leases, ttl)
				}
				if skew := time.Since(r.StoreTime); skew < -2*time.Second || skew > 2*time.Second {
					t.Errorf("store time %v is %v from this host's UTC clock; want the same clock, whatever the time zone", r.StoreTime, skew)
				}
			}
			h, err := other.Holder(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if h.Session != s.ID() || h.Token != g.Token || h.Remaining <= ttl-5*time.Second || h.Remaining > ttl {
				t.Errorf("the default pool sees holder %+v; want session %s, token %d, about %v left", h, s.ID(), g.Token, ttl)
			}
			if _, err := other.Acquire(ctx, name); err == nil {
				t.Error("another session acquired a lease held by a live session")
			}
			if err := s.PutValue(ctx, name, g.Token, []byte("v")); err != nil {
				t.Fatal(err)
			}
			if d, err := s.Release(ctx, name, g.Token); err != nil || d.Leases != 0 {
				t.Fatalf("Release = %+v, %v; want 0 leases", d, err)
			}
			g2, err := other.Acquire(ctx, name)
			if err != nil || g2.Token <= g.Token || string(g2.Value) != "v" {
				t.Fatalf("Acquire after the release = %+v, %v; want a greater token and the value", g2, err)
			}
		})
	}
}

// checksums returns CHECKSUM TABLE of every table of the prefix.
func checksums(t *testing.T, prefix string) string {
	t.Helper()
	admin := newDB(t, sharedURL(t), nil)
	var out []string
	for _, name := range tableNames {
		var table string
		var sum any
		if err := admin.QueryRow("CHECKSUM TABLE "+prefix+"_"+name+" EXTENDED").Scan(&table, &sum); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%s", table, sum))
	}
	return strings.Join(out, " ")
}

// A read-only opening (simba status and simba watch, through
// backendurl.OpenInspector) lists what the tables hold and writes nothing:
// every table's checksum is the same before and after, although an expired
// session waits to be reaped, which any other call would do. On a prefix
// without tables it lists nothing and creates nothing.
func TestReadOnlyWritesNothing(t *testing.T) {
	admin := newDB(t, sharedURL(t), nil)
	b := newBackend(t, newDB(t, sharedURL(t), nil), admin, WithMaxLease(time.Minute))
	ctx := testCtx(t)
	live := mustOpen(t, b, time.Minute)
	if _, err := live.Acquire(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if err := live.Join(ctx, "group", 4); err != nil {
		t.Fatal(err)
	}
	dead := mustOpen(t, b, time.Minute)
	if _, err := dead.Acquire(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	expireSession(t, admin, b.Prefix(), dead.ID())
	before := checksums(t, b.Prefix())

	raw := withParams(t, "simba_prefix="+b.Prefix())
	in, c, err := backendurl.OpenInspector(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := in.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.(backends.Backend).OpenSession(ctx, backends.SessionOptions{TTL: time.Second}); err == nil {
		t.Error("a read-only backend opened a session")
	}
	c.Close()
	if len(inv.Sessions) != 1 || inv.Sessions[0].ID != live.ID() || len(inv.Leases) != 1 || inv.Leases[0].Name != "held" ||
		len(inv.Groups) != 1 || inv.Groups[0].Partitions != 4 {
		t.Errorf("Inspect = %+v; want the live session, its lease and its group", inv)
	}
	if after := checksums(t, b.Prefix()); after != before {
		t.Errorf("the tables changed under a read-only opening:\nbefore %s\nafter  %s", before, after)
	}

	missing := uniquePrefix()
	in, c, err = backendurl.OpenInspector(ctx, withParams(t, "simba_prefix="+missing))
	if err != nil {
		t.Fatalf("OpenInspector on a prefix without tables: %v", err)
	}
	if inv, err := in.Inspect(ctx); err != nil || len(inv.Sessions)+len(inv.Leases)+len(inv.Groups) != 0 {
		t.Errorf("Inspect of a prefix without tables = %+v, %v; want nothing", inv, err)
	}
	c.Close()
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?",
		missing+`\_%`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d tables of prefix %s after a read-only opening (%v); want none", n, missing, err)
	}
}
