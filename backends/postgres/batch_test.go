package simbapg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// batchCase is one name of a batch and what its result must be.
type batchCase struct {
	name  string
	want  string         // "new" (a new grant), "same" (held already), "repeat", "held", "recovering", "expired"
	token backends.Token // "same": the token it is held with; "held": the holder's
	of    int            // "repeat": the index of the name's first place in the batch
	value string         // "new": the value the grant carries
}

// checkBatch runs AcquireBatch of the cases' names on s, whose digest was
// base before, and checks each result against its case: new grants with
// tokens strictly increasing along the batch and above floor, each with
// the digest right after its own grant; names held already, or given
// before in the batch, with their token and the digest unchanged; refusals
// with the error's kind. It returns the results.
func checkBatch(t *testing.T, s backends.Session, base backends.Digest, floor backends.Token, cases []batchCase) []backends.AcquireResult {
	t.Helper()
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	rs, err := s.(backends.BatchSession).AcquireBatch(testCtx(t), names)
	if err != nil || len(rs) != len(cases) {
		t.Fatalf("AcquireBatch(%q) = %+v, %v; want one result per name", names, rs, err)
	}
	d, last := base, floor
	for i, c := range cases {
		r, what := rs[i], fmt.Sprintf("AcquireBatch result %d (%q, %s)", i, c.name, c.want)
		var he *backends.HeldError
		switch c.want {
		case "new":
			d.Leases++
			d.Version++
			switch {
			case r.Err != nil:
				t.Errorf("%s: %v; want a grant", what, r.Err)
			case r.Grant.Token <= last:
				t.Errorf("%s: token %d after %d; want tokens increasing along the batch and per name (T2)", what, r.Grant.Token, last)
			case r.Grant.Digest.Leases != d.Leases || r.Grant.Digest.Version != d.Version:
				t.Errorf("%s: digest %+v; want %+v, right after its own grant", what, r.Grant.Digest, d)
			case string(r.Grant.Value) != c.value:
				t.Errorf("%s: value %q; want %q", what, r.Grant.Value, c.value)
			}
			if r.Err == nil {
				last = r.Grant.Token
			}
		case "same", "repeat":
			tok := c.token
			if c.want == "repeat" {
				tok = rs[c.of].Grant.Token
			}
			if r.Err != nil || r.Grant.Token != tok || r.Grant.Digest.Leases != d.Leases || r.Grant.Digest.Version != d.Version {
				t.Errorf("%s: %+v, %v; want token %d and digest %+v", what, r.Grant, r.Err, tok, d)
			}
		case "held":
			if !errors.As(r.Err, &he) || he.Holder.Token != c.token {
				t.Errorf("%s: %+v, %v; want a *HeldError with token %d", what, r.Grant, r.Err, c.token)
			}
		case "recovering":
			if !errors.Is(r.Err, backends.ErrRecovering) {
				t.Errorf("%s: %+v, %v; want ErrRecovering", what, r.Grant, r.Err)
			}
		case "expired":
			if !errors.Is(r.Err, backends.ErrSessionExpired) {
				t.Errorf("%s: %+v, %v; want ErrSessionExpired", what, r.Grant, r.Err)
			}
		default:
			t.Fatalf("case %q: unknown want %q", c.name, c.want)
		}
	}
	return rs
}

// digestOf returns s's digest, by a keep-alive.
func digestOf(t *testing.T, s backends.Session) backends.Digest {
	t.Helper()
	r, err := s.KeepAlive(testCtx(t))
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	return r.Digest
}

// The set path of acquire_batch, against the server: a batch mixing new
// names, a free record that keeps its value, a name held by another live
// session, one held by a session that expired (taken over, which ends it),
// one the session holds, partition names and a repeat gets, name by name,
// what single acquires one after the other would — the grants' tokens
// increasing along the batch, each digest right after its own grant — and
// the records say so. Names granted in bulk lie before, between and after
// those that need acquire's full logic, so that a run that is cut short,
// misplaced or counted twice shows.
func TestAcquireBatchMixed(t *testing.T) {
	b, admin := sharedBackend(t)
	ctx := testCtx(t)
	a := mustOpen(t, b, time.Minute)
	other := mustOpen(t, b, time.Minute)
	gone := mustOpen(t, b, time.Minute)

	theirs, err := other.Acquire(ctx, "theirs")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := a.Acquire(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := gone.Acquire(ctx, "stale")
	if err != nil {
		t.Fatal(err)
	}
	expireSession(t, admin, b.Schema(), gone.ID())
	kept, err := other.Acquire(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.PutValue(ctx, "kept", kept.Token, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Release(ctx, "kept", kept.Token); err != nil {
		t.Fatal(err)
	}

	cases := []batchCase{
		{name: "new-1", want: "new"},
		{name: "new-2", want: "new"},
		{name: "theirs", want: "held", token: theirs.Token},
		{name: "new-3", want: "new"},
		{name: "kept", want: "new", value: "v"},
		{name: "mine", want: "same", token: mine.Token},
		{name: "grp.0", want: "new"},
		{name: "new-4", want: "new"},
		{name: "stale", want: "new"},
		{name: "new-1", want: "repeat", of: 0},
		{name: "new-5", want: "new"},
		{name: "grp.1", want: "new"},
		{name: "new-6", want: "new"},
		{name: "new-6", want: "repeat", of: 12},
		{name: "new-7", want: "new"},
	}
	rs := checkBatch(t, a, digestOf(t, a), max(mine.Token, theirs.Token, stale.Token, kept.Token), cases)

	// The records say what the results said.
	want := map[string]string{"theirs": string(other.ID()), "stale": string(a.ID())}
	for i, c := range cases {
		if c.want == "new" {
			want[c.name] = string(a.ID())
			if rs[i].Err != nil {
				continue
			}
			var tok int64
			var holder *string
			if err := admin.QueryRow(ctx, "SELECT session_id, token FROM "+ident(b.Schema())+".leases WHERE name = $1", c.name).Scan(&holder, &tok); err != nil {
				t.Fatal(err)
			}
			if deref(holder) != string(a.ID()) || backends.Token(tok) != rs[i].Grant.Token {
				t.Errorf("the record of %q: held by %q with token %d; want %s with %d", c.name, deref(holder), tok, a.ID(), rs[i].Grant.Token)
			}
		}
	}
	var grp *string
	var part *int32
	if err := admin.QueryRow(ctx, "SELECT grp, part FROM "+ident(b.Schema())+".leases WHERE name = 'grp.1'").Scan(&grp, &part); err != nil || deref(grp) != "grp" || deref(part) != 1 {
		t.Errorf("the record of \"grp.1\": group %v, index %v (%v); want grp and 1", deref(grp), deref(part), err)
	}
	if d := digestOf(t, a); d != rs[len(rs)-1].Grant.Digest {
		t.Errorf("digest after the batch %+v; want the last grant's %+v", d, rs[len(rs)-1].Grant.Digest)
	}
	held, _, err := a.Owned(ctx)
	if err != nil || len(held) != 12 {
		t.Errorf("Owned after the batch: %d leases (%v), %v; want 12", len(held), held, err)
	}
	if _, err := gone.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive of the expired holder whose lease the batch took = %v; want ErrSessionExpired", err)
	}
}

// A run of names granted in bulk that meets a record it may not write —
// here a free one whose last token is above the sequence's next, as a
// restored or hand-edited schema may have — is undone as a whole, and its
// names go through acquire one by one, which keeps each name's tokens
// increasing (the record's token plus one) and the digests in order.
func TestAcquireBatchRunUndone(t *testing.T) {
	b, admin := sharedBackend(t)
	ctx := testCtx(t)
	a := mustOpen(t, b, time.Minute)
	g, err := a.Acquire(ctx, "high")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, "high", g.Token); err != nil {
		t.Fatal(err)
	}
	const high = 1 << 60
	mustExec(t, admin, "UPDATE "+ident(b.Schema())+".leases SET token = $1 WHERE name = 'high'", int64(high))
	base := digestOf(t, a)
	names := []string{"n-1", "high", "n-2"}
	rs, err := a.(backends.BatchSession).AcquireBatch(ctx, names)
	if err != nil || len(rs) != len(names) {
		t.Fatalf("AcquireBatch(%q) = %+v, %v; want one result per name", names, rs, err)
	}
	for i, r := range rs {
		d := backends.Digest{Leases: base.Leases + i + 1, Version: base.Version + uint64(i) + 1}
		if r.Err != nil || r.Grant.Digest != d {
			t.Errorf("AcquireBatch result %d (%q): %+v, %v; want a grant with digest %+v", i, names[i], r.Grant, r.Err, d)
		}
	}
	if rs[1].Grant.Token != high+1 {
		t.Errorf("the grant of a free record of token %d: token %d; want %d (T2)", int64(high), rs[1].Grant.Token, int64(high)+1)
	}
	if rs[0].Grant.Token <= g.Token || rs[2].Grant.Token <= rs[0].Grant.Token {
		t.Errorf("tokens of the other names %d, %d after %d; want them increasing", rs[0].Grant.Token, rs[2].Grant.Token, g.Token)
	}
	if held, _, err := a.Owned(ctx); err != nil || len(held) != 3 {
		t.Errorf("Owned after the batch = %v, %v; want the three names", held, err)
	}
}

// A batch of a session that expired (its row still there), or made during
// the amnesia guard, grants nothing: each name says why, as acquire does.
func TestAcquireBatchRefused(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b := newBackend(t, newPool(t, dsn, nil), admin)
	a := mustOpen(t, b, time.Minute)
	base := digestOf(t, a)
	expireSession(t, admin, b.Schema(), a.ID())
	checkBatch(t, a, base, 0, []batchCase{{name: "x", want: "expired"}, {name: "y", want: "expired"}, {name: "x", want: "expired"}})

	guarded := guardedBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(time.Minute))
	s := mustOpen(t, guarded, time.Minute)
	checkBatch(t, s, digestOf(t, s), 0, []batchCase{{name: "x", want: "recovering"}, {name: "g.0", want: "recovering"}, {name: "x", want: "recovering"}})
}

// Functions of revision 4 have no acquire_batch: a backend that may not
// replace them (WithoutMigration here) batches with acquire once per name,
// with the same results; one that may, replaces them and uses it.
func TestAcquireBatchOlderFunctions(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	b := newBackend(t, newPool(t, dsn, nil), admin)
	ctx := testCtx(t)
	schema := ident(b.Schema())
	mustExec(t, admin, "DROP FUNCTION "+schema+".acquire_batch")
	mustExec(t, admin, "COMMENT ON TABLE "+schema+".meta IS 'functions revision 4'")

	old := sameSchema(t, b, newPool(t, dsn, nil), WithoutMigration())
	other := mustOpen(t, old, time.Minute)
	theirs, err := other.Acquire(ctx, "theirs")
	if err != nil {
		t.Fatal(err)
	}
	a := mustOpen(t, old, time.Minute)
	if r := old.revision.Load(); r != 4 {
		t.Fatalf("the backend read revision %d; want 4", r)
	}
	checkBatch(t, a, digestOf(t, a), theirs.Token, []batchCase{
		{name: "x", want: "new"}, {name: "theirs", want: "held", token: theirs.Token}, {name: "x", want: "repeat", of: 0}, {name: "y", want: "new"},
	})

	upgraded := sameSchema(t, b, newPool(t, dsn, nil))
	s := mustOpen(t, upgraded, time.Minute)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", b.Schema()+".acquire_batch(text, text[], text[], integer[], interval, boolean)").Scan(&exists); err != nil || !exists {
		t.Fatalf("acquire_batch after the upgrade: exists %v, %v; want it installed", exists, err)
	}
	checkBatch(t, s, digestOf(t, s), theirs.Token, []batchCase{{name: "z", want: "new"}, {name: "theirs", want: "held", token: theirs.Token}})
}

// A batch's grant of a name that a backend follows (a shared advisory lock
// on the name's key, as notify.go takes) is told on the channel, and the
// grants of names nobody follows are not.
func TestAcquireBatchNotifiesFollowed(t *testing.T) {
	b, admin := sharedBackend(t)
	ctx := testCtx(t)
	conn, err := admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+ident(b.Channel())); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock_shared(hashtextextended($1, 0))", b.Channel()+" followed"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock_all()")
	a := mustOpen(t, b, time.Minute)
	rs := checkBatch(t, a, digestOf(t, a), 0, []batchCase{{name: "quiet", want: "new"}, {name: "followed", want: "new"}, {name: "quiet-2", want: "new"}})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no notification of the batch's grant of a followed name: %v", err)
	}
	want := fmt.Sprintf(" g %d ", rs[1].Grant.Token)
	if !strings.HasPrefix(n.Payload, want) || !strings.Contains(n.Payload, " "+string(a.ID())+" followed ") {
		t.Errorf("the first notification after the batch: %q; want the grant of \"followed\" (%q…)", n.Payload, want)
	}
}
