package backendtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// §12, §13: Members lists the live members, sorted, and the holder of every
// partition; joining twice is idempotent; leaving ends the membership but
// keeps the leases; a group without members has no partitions.
func testGroupMembers(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	if v := e.members(a, "group"); v.Partitions != 0 || len(v.Members) != 0 {
		t.Errorf("Members of a group nobody joined = %+v; want no members and no partitions", v)
	}
	e.join(a, "group", 4)
	e.join(b, "group", 4)
	e.join(a, "group", 4) // idempotent
	both := []backends.SessionID{a.ID(), b.ID()}
	slices.Sort(both)
	v := e.members(b, "group")
	if v.Partitions != 4 || !slices.Equal(v.Members, both) || !slices.Equal(v.Holders, make([]backends.SessionID, 4)) {
		t.Errorf("Members = %+v; want 4 partitions, members %v, all partitions free", v, both)
	}
	e.acquire(a, backends.PartitionName("group", 1))
	e.acquire(b, backends.PartitionName("group", 3))
	e.acquire(b, "group") // a lease named like the group is not a partition
	want := []backends.SessionID{"", a.ID(), "", b.ID()}
	if v := e.members(a, "group"); !slices.Equal(v.Holders, want) {
		t.Errorf("Holders = %v; want %v", v.Holders, want)
	}
	if err := a.Leave(e.ctx, "group"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := a.Leave(e.ctx, "group"); err != nil {
		t.Errorf("second Leave = %v; want nil", err)
	}
	if err := a.Leave(e.ctx, "unjoined"); err != nil {
		t.Errorf("Leave of a group never joined = %v; want nil", err)
	}
	v = e.members(b, "group")
	if !slices.Equal(v.Members, []backends.SessionID{b.ID()}) || !slices.Equal(v.Holders, want) {
		t.Errorf("after a left: Members = %+v; want only %s, and a still holding partition 1", v, b.ID())
	}
}

// §12: Digest.Groups changes when a member joins or leaves a group the
// session joined, when a member's session ends, and when a partition of the
// group changes holder; it is stable otherwise.
func testGroupEpoch(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	e.join(a, "group", 4)
	d := e.keepAlive(a).Digest
	step := func(what string, wantChange bool) {
		t.Helper()
		d2 := e.keepAlive(a).Digest
		switch {
		case wantChange && d2.Groups == d.Groups:
			t.Errorf("after %s: Digest.Groups %d unchanged; want a change", what, d2.Groups)
		case !wantChange && d2 != d:
			t.Errorf("after %s: digest %+v; want %+v unchanged", what, d2, d)
		}
		d = d2
	}
	step("nothing", false)
	e.join(b, "group", 4)
	step("b joining", true)
	e.join(b, "group", 4)
	step("b joining again", false)
	g2 := e.acquire(b, backends.PartitionName("group", 2))
	step("b taking partition 2", true)
	gx := e.acquire(b, "unrelated")
	e.acquire(b, backends.PartitionName("other", 0))
	e.acquire(b, backends.PartitionName("group", 4)) // beyond its 4 partitions: not one of them
	e.acquire(b, "group.02")                         // not a partition name
	step("b taking leases outside the group", false)
	e.release(b, "unrelated", gx.Token)
	e.release(b, backends.PartitionName("group", 2), g2.Token+1)
	step("b's unrelated and stale releases", false)
	e.release(b, backends.PartitionName("group", 2), g2.Token)
	step("b releasing partition 2", true)
	if err := b.Leave(e.ctx, "group"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	step("b leaving", true)
	c, _ := e.open()
	e.join(c, "group", 4)
	step("c joining", true)
	if err := c.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	step("c closing", true)
	e.join(b, "other", 2)
	step("b joining another group", false)
}

// §13: a group's partition count is recorded by the first join while it has
// no members; a join with another count fails with ErrGroupMismatch until
// every member has left.
func testGroupMismatch(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	e.join(a, "group", 4)
	wantErr(t, b.Join(e.ctx, "group", 8), backends.ErrGroupMismatch, "Join with 8 partitions of a group of 4")
	if v := e.members(b, "group"); v.Partitions != 4 || !slices.Equal(v.Members, []backends.SessionID{a.ID()}) {
		t.Errorf("after the refused join: Members = %+v; want 4 partitions and only %s", v, a.ID())
	}
	if err := a.Leave(e.ctx, "group"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	e.join(b, "group", 8)
	if v := e.members(a, "group"); v.Partitions != 8 {
		t.Errorf("after every member left and b joined with 8: %d partitions; want 8", v.Partitions)
	}
}

// §12, S1: membership dies with the session: when a member's session expires
// it drops out of Members, its partitions show as free, and the other
// members' Digest.Groups changes.
func testMembershipDiesWithSession(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	e.join(a, "group", 2)
	e.join(b, "group", 2)
	e.acquire(a, backends.PartitionName("group", 0))
	before := e.keepAlive(b).Digest

	sentAt := time.Now()
	r := e.keepAlive(a)
	e.waitExpired(sentAt, r, b)
	var v backends.GroupView
	gone := e.eventually(h.ExpiryGrace, func() bool {
		v = e.members(b, "group")
		return !slices.Contains(v.Members, a.ID())
	}, b)
	if !gone {
		t.Fatalf("Members = %v %v after a's session should have expired; want a gone", v.Members, r.Remaining+2*h.ExpiryGrace)
	}
	if !slices.Equal(v.Members, []backends.SessionID{b.ID()}) || !slices.Equal(v.Holders, []backends.SessionID{"", ""}) {
		t.Errorf("after a expired: Members = %+v; want only %s and both partitions free", v, b.ID())
	}
	if after := e.keepAlive(b).Digest; after.Groups == before.Groups {
		t.Errorf("b's Digest.Groups %d unchanged after member a expired; want a change", after.Groups)
	}
}

// T1: lease and group names that break the naming rule are rejected with
// ErrInvalidName by every call that takes one, and the session stays usable.
func testInvalidNames(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	s, _ := e.open()
	for _, name := range []string{"", ".", "..", "a/b", "sp ace", "ünï", "star*", strings.Repeat("x", backends.MaxNameLen+1)} {
		_, err := s.Acquire(e.ctx, name)
		wantErr(t, err, backends.ErrInvalidName, "Acquire(%q)", name)
		var ne *backends.NameError
		if !errors.As(err, &ne) || ne.Name != name {
			t.Errorf("Acquire(%q) = %v; want a *backends.NameError naming the bad input (T1)", name, err)
		}
		_, err = s.Release(e.ctx, name, 1)
		wantErr(t, err, backends.ErrInvalidName, "Release(%q)", name)
		wantErr(t, s.PutValue(e.ctx, name, 1, nil), backends.ErrInvalidName, "PutValue(%q)", name)
		wantErr(t, s.Join(e.ctx, name, 2), backends.ErrInvalidName, "Join(%q)", name)
		wantErr(t, s.Leave(e.ctx, name), backends.ErrInvalidName, "Leave(%q)", name)
		_, err = s.Holder(e.ctx, name)
		wantErr(t, err, backends.ErrInvalidName, "Holder(%q)", name)
		_, err = s.Members(e.ctx, name)
		wantErr(t, err, backends.ErrInvalidName, "Members(%q)", name)
	}
	long := strings.Repeat("g", backends.MaxNameLen-2) // "g….10" is too long
	wantErr(t, s.Join(e.ctx, long, 11), backends.ErrInvalidName, "Join(%d-byte name, 11 partitions)", len(long))
	for _, n := range []int{0, -1, backends.MaxPartitions + 1} {
		if err := s.Join(e.ctx, "group", n); err == nil {
			t.Errorf("Join(group, %d) = nil; want an error", n)
		}
	}
	if held, _ := e.owned(s); len(held) != 0 {
		t.Errorf("after invalid calls the session owns %v; want nothing", held)
	}
	e.acquire(s, "valid-name_1:2.3")
}
