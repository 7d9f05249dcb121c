package watch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFireAndStop(t *testing.T) {
	var r Registry
	var a, b atomic.Int32
	stopA := r.Add("x", func() { a.Add(1) })
	r.Add("y", func() { b.Add(1) })
	r.FireFrom("", "x")
	r.FireFrom("", "z")
	if a.Load() != 1 || b.Load() != 0 {
		t.Fatalf("after x fired: a=%d b=%d, want 1 0", a.Load(), b.Load())
	}
	r.FireAll()
	if a.Load() != 2 || b.Load() != 1 {
		t.Fatalf("after FireAll: a=%d b=%d, want 2 1", a.Load(), b.Load())
	}
	stopA()
	stopA() // twice is fine
	r.FireFrom("", "x")
	if a.Load() != 2 || r.Len() != 1 {
		t.Fatalf("after stop: a=%d, %d names watched; want 2 and 1", a.Load(), r.Len())
	}
}

// A session's own releases do not call its own watches; watches of other
// sessions and watches without an owner are called.
func TestFireFrom(t *testing.T) {
	var r Registry
	var mine, theirs, anyone atomic.Int32
	r.AddFor("s1", "x", func() { mine.Add(1) })
	r.AddFor("s2", "x", func() { theirs.Add(1) })
	r.Add("x", func() { anyone.Add(1) })
	r.FireFrom("s1", "x")
	if mine.Load() != 0 || theirs.Load() != 1 || anyone.Load() != 1 {
		t.Fatalf("after FireFrom(s1, x): mine=%d theirs=%d anyone=%d; want 0 1 1", mine.Load(), theirs.Load(), anyone.Load())
	}
	r.FireFrom("", "x")
	r.FireFrom("s3", "y")
	if mine.Load() != 1 || theirs.Load() != 2 || anyone.Load() != 2 {
		t.Fatalf("after FireFrom(\"\", x): mine=%d theirs=%d anyone=%d; want 1 2 2", mine.Load(), theirs.Load(), anyone.Load())
	}
}

// Stop waits for a call in progress; no call starts after it returns; calls
// of one watch never overlap.
func TestStopWaitsAndCallsDoNotOverlap(t *testing.T) {
	var r Registry
	var inside, overlaps, after atomic.Int32
	var stopped atomic.Bool
	stop := r.Add("x", func() {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		if stopped.Load() {
			after.Add(1)
		}
		time.Sleep(time.Millisecond)
		inside.Add(-1)
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				r.FireFrom("", "x")
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	stop()
	stopped.Store(true)
	wg.Wait()
	if overlaps.Load() != 0 || after.Load() != 0 {
		t.Fatalf("%d overlapping calls, %d calls after stop returned; want none", overlaps.Load(), after.Load())
	}
}
