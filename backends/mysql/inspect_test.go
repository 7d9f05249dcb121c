package simbamysql

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Inspect reads its listings a page at a time (inspectPage rows per
// statement), each page after the last key of the one before: every lease
// of a store larger than a page is listed once, with its token.
func TestInspectPages(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	b := newBackend(t, newDB(t, url, nil), admin)
	ctx := context.Background()
	s := mustOpen(t, b, time.Minute)
	n := inspectPage + inspectPage/2
	tokens := make(map[string]uint64, n)
	for i := range n {
		if i%100 == 0 { // the session lives MaxLease, 2 s, past its last renewal
			if _, err := s.KeepAlive(ctx); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("page:%05d", i)
		g, err := s.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = uint64(g.Token)
	}
	inv, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Leases) != n {
		t.Fatalf("Inspect listed %d leases; want %d (pages of %d)", len(inv.Leases), n, inspectPage)
	}
	for _, l := range inv.Leases {
		want, ok := tokens[l.Name]
		if !ok {
			t.Fatalf("Inspect listed %q, which nobody acquired (or twice)", l.Name)
		}
		if uint64(l.Token) != want {
			t.Errorf("Inspect: %q token %d; want %d", l.Name, l.Token, want)
		}
		delete(tokens, l.Name)
	}
	if len(inv.Sessions) != 1 || inv.Sessions[0].ID != s.ID() {
		t.Errorf("Inspect sessions = %+v; want the one session %s", inv.Sessions, s.ID())
	}
}
