package simbapg

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends"
)

// A leave commits without waiting for its flush (leave_group in
// schema.sql), so a crash may undo it; the session leaves again, durably,
// at its next renewal. Here the undo is played by putting the member row
// back behind the session's back: after the renewal the session is no
// longer a member. A session that joined again after leaving stays a member
// through its renewals.
func TestLeaveConfirmedAtRenewal(t *testing.T) {
	b, admin := sharedBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() backends.Session {
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	a, other := open(), open()
	members := func() []backends.SessionID {
		t.Helper()
		v, err := other.Members(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		return v.Members
	}
	for _, s := range []backends.Session{a, other} {
		if err := s.Join(ctx, "g", 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Leave(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	// The leave "lost in a crash".
	mustExec(t, admin, "INSERT INTO "+pgx.Identifier{b.Schema()}.Sanitize()+".members (grp, session_id) VALUES ('g', $1)", string(a.ID()))
	if got := members(); !slices.Contains(got, a.ID()) {
		t.Fatalf("members after the member row was put back = %v; want %s listed (the test undoes nothing)", got, a.ID())
	}
	if _, err := a.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	if got := members(); slices.Contains(got, a.ID()) {
		t.Errorf("members after the renewal that follows a lost leave = %v; want %s gone", got, a.ID())
	}

	// Left, then joined again: the renewal leaves nothing.
	if err := a.Leave(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if err := a.Join(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := members(); !slices.Contains(got, a.ID()) {
		t.Errorf("members after a leave, a join and renewals = %v; want %s still a member", got, a.ID())
	}
}
