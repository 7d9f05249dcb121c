package memory_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
)

// A HolderNotifier watch is told every change of the holder, in order:
// each grant with its holder and token, each release, a session's end and
// a restart with the ended term's token; none after stop; a nil function
// watches nothing. Two sessions taking turns from two goroutines keep the
// order the store made.
func TestWatchHolderEveryChange(t *testing.T) {
	synctest.Test(t, testWatchHolderEveryChange)
}

func testWatchHolderEveryChange(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	a, _ := open(t, s, time.Minute)
	b, _ := open(t, s, time.Minute)
	w, _ := open(t, s, time.Minute)
	var mu sync.Mutex
	var got []string
	stop := w.(backends.HolderNotifier).WatchHolder("x", func(h backends.Holder) {
		mu.Lock()
		defer mu.Unlock()
		if h.Session == "" {
			got = append(got, fmt.Sprintf("free %d", h.Token))
		} else {
			got = append(got, fmt.Sprintf("%s %d", h.Session, h.Token))
		}
	})
	defer w.(backends.HolderNotifier).WatchHolder("x", nil)()

	var want []string
	var wantMu sync.Mutex
	var turn sync.Mutex // the two goroutines take turns; the store orders them
	var wg sync.WaitGroup
	for _, sess := range []backends.Session{a, b} {
		wg.Go(func() {
			for range 50 {
				turn.Lock()
				g, err := sess.Acquire(ctx, "x")
				if err != nil {
					turn.Unlock()
					t.Error(err)
					return
				}
				if _, err := sess.Release(ctx, "x", g.Token); err != nil {
					t.Error(err)
				}
				wantMu.Lock()
				want = append(want, fmt.Sprintf("%s %d", sess.ID(), g.Token), fmt.Sprintf("free %d", g.Token))
				wantMu.Unlock()
				turn.Unlock()
			}
		})
	}
	wg.Wait()

	// A session's end and a restart tell the release too.
	g, err := a.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	s.Faults().ExpireSession(a.ID())
	g2, err := b.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	s.Faults().Restart()
	want = append(want, fmt.Sprintf("%s %d", a.ID(), g.Token), fmt.Sprintf("free %d", g.Token),
		fmt.Sprintf("%s %d", b.ID(), g2.Token), fmt.Sprintf("free %d", g2.Token))

	stop()
	stop()
	mu.Lock()
	n := len(got)
	mu.Unlock()
	c, _ := open(t, s, time.Minute)
	time.Sleep(s.MaxLease()) // past the restart's guard
	if g, err := c.Acquire(ctx, "x"); err == nil {
		c.Release(ctx, "x", g.Token)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("the watch was told %d changes after stop returned", len(got)-n)
	}
	if !slices.Equal(got, want) {
		t.Errorf("told %d changes, want %d; first difference at %d:\n got %q\nwant %q", len(got), len(want),
			firstDiff(got, want), got[min(firstDiff(got, want), len(got)-1):], want[min(firstDiff(got, want), len(want)-1):])
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
