package pgfence_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/fencing/fencingtest"
	"github.com/simba-go/simba/fencing/pgfence"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// pool connects to the test database (internal/testkit/testservers): skipped on a
// bare machine, failed under make test when PostgreSQL is missing.
func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), testservers.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newTable creates a table of its own for the test and drops it afterwards,
// so that tests never see each other's rows.
func newTable(t testing.TB, p *pgxpool.Pool, opts ...pgfence.Option) (*pgfence.Table, string) {
	t.Helper()
	name := "fence_test_" + strings.ToLower(rand.Text()[:10])
	tab, err := pgfence.New(p, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := p.Exec(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return tab, name
}

// TestConformance runs the conformance kit on the PostgreSQL recipe (F3, F4):
// a new resource id per check, in one table.
func TestConformance(t *testing.T) {
	tab, _ := newTable(t, pool(t))
	n := 0
	fencingtest.Run(t, func(testing.TB) fencing.Resource {
		n++
		return tab.Resource(fmt.Sprintf("resource-%d", n))
	})
}

func TestWrite(t *testing.T) {
	p := pool(t)
	tab, name := newTable(t, p)
	ctx := t.Context()

	if err := tab.Write(ctx, "invoice:1", 3, []byte("v3")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	// A retry with the same token and value matches the row again:
	// accepted, although nothing changes (F3).
	if err := tab.Write(ctx, "invoice:1", 3, []byte("v3")); err != nil {
		t.Fatalf("retry with the same token and value: %v", err)
	}
	err := tab.Write(ctx, "invoice:1", 2, []byte("v2"))
	if !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("write with token 2 after 3 = %v; want ErrStaleToken", err)
	}
	if !strings.Contains(err.Error(), `"invoice:1"`) || !strings.Contains(err.Error(), "token 2") {
		t.Errorf("the error does not name the resource and token: %v", err)
	}
	// Resources are independent rows.
	if err := tab.Write(ctx, "invoice:2", 1, nil); err != nil {
		t.Fatalf("write to another id: %v", err)
	}

	var rows int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM "+name).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("rows = %d, %v; want 2 (one per resource)", rows, err)
	}
	if v, tok, err := tab.Read(ctx, "invoice:1"); err != nil || tok != 3 || string(v) != "v3" {
		t.Errorf("Read(invoice:1) = (%q, %d, %v); want (v3, 3, nil)", v, tok, err)
	}
	if v, tok, err := tab.Read(ctx, "invoice:3"); err != nil || tok != 0 || v != nil {
		t.Errorf("Read of a resource never written = (%q, %d, %v); want (nil, 0, nil)", v, tok, err)
	}
}

// TestTransaction shows the write taking part in the caller's transaction.
func TestTransaction(t *testing.T) {
	p := pool(t)
	_, name := newTable(t, p)
	ctx := t.Context()
	for _, commit := range []bool{false, true} {
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := pgfence.New(tx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := tab.Write(ctx, "r", 5, []byte("in tx")); err != nil {
			t.Fatal(err)
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		outside, _ := pgfence.New(p, name)
		_, tok, err := outside.Read(ctx, "r")
		if want := backends.Token(map[bool]int{false: 0, true: 5}[commit]); err != nil || tok != want {
			t.Errorf("commit=%v: token read outside = %d, %v; want %d", commit, tok, err, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	p := pool(t)
	tab, _ := newTable(t, p, pgfence.WithMaxValueSize(16))
	ctx := t.Context()

	for _, tok := range []backends.Token{0, -1} {
		if err := tab.Write(ctx, "r", tok, []byte("x")); !errors.Is(err, fencing.ErrInvalidToken) {
			t.Errorf("Write(token %d) = %v; want ErrInvalidToken", tok, err)
		}
	}
	err := tab.Write(ctx, "r", 1, make([]byte, 17))
	if !errors.Is(err, fencing.ErrValueTooLarge) || !strings.Contains(err.Error(), "17 bytes; at most 16") {
		t.Errorf("Write of 17 bytes = %v; want ErrValueTooLarge naming both sizes", err)
	}
	if _, tok, _ := tab.Read(ctx, "r"); tok != 0 {
		t.Errorf("rejected writes left token %d", tok)
	}
	if err := tab.Write(ctx, "r", 1, make([]byte, 16)); err != nil {
		t.Errorf("Write of exactly the maximum: %v", err)
	}
	for _, id := range []string{"", "a\x00b", "\xff"} {
		if err := tab.Write(ctx, id, 1, nil); err == nil {
			t.Errorf("Write(id %q) = nil; want an error", id)
		}
	}

	if _, err := pgfence.New(nil, "t"); err == nil {
		t.Error("New(nil DB) = nil error")
	}
	if _, err := pgfence.New((*pgxpool.Pool)(nil), "t"); err == nil {
		t.Error("New((*pgxpool.Pool)(nil)) = nil error")
	}
	for _, name := range []string{"", "a.b.c", "1abc", "bad-name", `x"; drop table y; --`, strings.Repeat("a", 64)} {
		if _, err := pgfence.New(p, name); err == nil {
			t.Errorf("New(table %q) = nil error", name)
		}
	}
	for _, n := range []int{-1, 1 << 30} {
		if _, err := pgfence.New(p, "t", pgfence.WithMaxValueSize(n)); err == nil {
			t.Errorf("WithMaxValueSize(%d) = nil error", n)
		}
	}
	var nilTable *pgfence.Table
	if err := nilTable.Write(ctx, "r", 1, nil); err == nil {
		t.Error("(*Table)(nil).Write = nil")
	}
}
