package simbamysql

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// A keep-alive reaps expired sessions after its renewal commits, and ending
// a session moves the groups' revision counter: while another transaction
// holds the counter (another call's reaping, a leave, a join), the reaping
// is skipped rather than waited for, so the keep-alive's reply comes at
// once; the next call reaps once the counter is free. Until routines
// revision 4 the reaping waited for the counter up to the lock wait bound
// (1 s), and the renewal's reply with it.
func TestReapSkipsBusyCounter(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	b := newBackend(t, newDB(t, url, nil), admin)
	ctx := context.Background()
	opts := backends.SessionOptions{TTL: 2 * time.Second, Identity: "reap"}
	expired, _, err := b.OpenSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := b.OpenSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The first session's row expires behind its client's back.
	if _, err := admin.ExecContext(ctx, "UPDATE "+b.Prefix()+"_sessions SET expires_us = 1 WHERE id = ?", string(expired.ID())); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+b.Prefix()+"_sessions WHERE id = ?", string(expired.ID())).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rev int64
	if err := tx.QueryRowContext(ctx, "SELECT v FROM "+b.Prefix()+"_seq WHERE id = 3 FOR UPDATE").Scan(&rev); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	// Well under the lock wait bound, well over a keep-alive's round trip.
	kctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, kerr := live.KeepAlive(kctx)
	cancel()
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if kerr != nil {
		t.Fatalf("keep-alive while another transaction holds the groups' revision counter: %v; want its reply at once, the reaping skipped", kerr)
	}
	if n := count(); n != 1 {
		t.Errorf("the expired session was reaped (%d rows left) while the counter was held; want it skipped", n)
	}

	if _, err := live.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("the expired session still has its row after a keep-alive with the counter free; want it reaped")
	}
}
