package fencing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/fencing/fencingtest"
)

// TestCellIsFenced runs the conformance kit on the in-process recipe (F3, F4).
func TestCellIsFenced(t *testing.T) {
	fencingtest.Run(t, func(testing.TB) fencing.Resource { return new(fencing.Cell) })
}

func TestGuardDo(t *testing.T) {
	var g fencing.Guard
	calls := 0
	write := func() error { calls++; return nil }

	if err := g.Do(4, write); err != nil || calls != 1 || g.Highest() != 4 {
		t.Fatalf("Do(4) = %v, calls %d, Highest %d; want nil, 1, 4", err, calls, g.Highest())
	}
	if err := g.Do(4, write); err != nil || calls != 2 {
		t.Fatalf("Do(4) again = %v, calls %d; want nil, 2 (F1: equal tokens are accepted)", err, calls)
	}
	err := g.Do(3, write)
	if !errors.Is(err, fencing.ErrStaleToken) || calls != 2 {
		t.Fatalf("Do(3) = %v, calls %d; want ErrStaleToken and write not called", err, calls)
	}
	if want := "simba: stale fencing token: token 3 is lower than the highest token accepted, 4"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}

	// A failed write does not record its token.
	boom := errors.New("disk full")
	if err := g.Do(9, func() error { return boom }); err != boom || g.Highest() != 4 {
		t.Fatalf("Do(9) with a failing write = %v, Highest %d; want the write's error, 4", err, g.Highest())
	}
	if err := g.Do(5, write); err != nil || g.Highest() != 5 {
		t.Fatalf("Do(5) = %v, Highest %d; want nil, 5", err, g.Highest())
	}
}

func TestBadInput(t *testing.T) {
	var g fencing.Guard
	for _, tok := range []backends.Token{0, -7} {
		err := g.Do(tok, func() error { t.Fatal("write called with an invalid token"); return nil })
		if !errors.Is(err, fencing.ErrInvalidToken) {
			t.Errorf("Do(%d) = %v; want ErrInvalidToken", tok, err)
		}
	}

	if err := g.Do(1, nil); err == nil {
		t.Error("Do(1, nil) = nil; want an error naming the nil write function")
	}

	var nilGuard *fencing.Guard
	if err := nilGuard.Do(1, func() error { return nil }); err == nil {
		t.Error("(*Guard)(nil).Do = nil; want an error")
	}
	var nilCell *fencing.Cell
	if err := nilCell.Write(context.Background(), 1, nil); err == nil {
		t.Error("(*Cell)(nil).Write = nil; want an error")
	}
	if _, _, err := nilCell.Read(context.Background()); err == nil {
		t.Error("(*Cell)(nil).Read = nil error; want an error")
	}
}

func TestCellCopies(t *testing.T) {
	var c fencing.Cell
	ctx := context.Background()
	v := []byte("abc")
	if err := c.Write(ctx, 1, v); err != nil {
		t.Fatal(err)
	}
	v[0] = 'X' // the caller's slice is not the cell's
	got, _, _ := c.Read(ctx)
	got[1] = 'Y' // nor is the reader's
	if again, tok, _ := c.Read(ctx); string(again) != "abc" || tok != 1 {
		t.Errorf("Read = (%q, %d); want (\"abc\", 1)", again, tok)
	}
}
