package runtime

import (
	"slices"
	"testing"
)

// runHere runs what add queued on the caller's goroutine, in order, without
// asking exec for a goroutine — up to its limit; the rest goes to exec, in
// order after it. While a goroutine runs the queue, runHere runs nothing.
func TestSerialQueueRunHere(t *testing.T) {
	var ran []int
	var execs []func()
	q := newSerialQueue(func(f func()) error { execs = append(execs, f); return nil })
	item := func(i int) queued { return queued{run: func() { ran = append(ran, i) }} }

	q.add(item(1))
	q.add(item(2))
	q.runHere(8)
	if !slices.Equal(ran, []int{1, 2}) || len(execs) != 0 {
		t.Fatalf("runHere of 2 items ran %v and asked exec %d times; want [1 2] and none", ran, len(execs))
	}

	ran = nil
	for i := range 5 {
		q.add(item(i))
	}
	q.runHere(3)
	if !slices.Equal(ran, []int{0, 1, 2}) || len(execs) != 1 {
		t.Fatalf("runHere(3) of 5 items ran %v and asked exec %d times; want [0 1 2] and once", ran, len(execs))
	}
	// A goroutine runs the queue now: runHere leaves what is added to it.
	q.add(item(5))
	q.runHere(8)
	if len(ran) != 3 {
		t.Fatalf("runHere while a goroutine runs the queue ran %v; want nothing more", ran)
	}
	for len(execs) > 0 {
		f := execs[0]
		execs = execs[1:]
		f()
	}
	if !slices.Equal(ran, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("ran %v; want [0 1 2 3 4 5], in order", ran)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running || len(q.items) != 0 {
		t.Fatalf("queue running %v with %d items left; want idle and empty", q.running, len(q.items))
	}
}
