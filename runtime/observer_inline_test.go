package runtime_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	simba "github.com/simba-go/simba/runtime"
)

// goid returns the current goroutine's id, from its stack's first line.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	n, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return n
}

// The events of a Lock and an Unlock that make their calls on the caller's
// goroutine are delivered on it, in order, before they return, when no older
// event is being delivered: a goroutine woken for each cost a pair about
// 50 µs on a 2-core machine.
func TestObserverInlineEvents(t *testing.T) {
	type seen struct {
		kind simba.EventKind
		g    uint64
	}
	var mu sync.Mutex
	var events []seen
	obs := simba.ObserverFunc(func(e simba.Event) {
		if e.Name != "x" {
			return
		}
		mu.Lock()
		events = append(events, seen{e.Kind, goid()})
		mu.Unlock()
	})
	c, err := simba.NewClient(memory.New(), simba.ConfigFor(time.Minute), simba.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer c.Close(ctx)
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !c.EventsIdle(); {
		if time.Now().After(deadline) {
			t.Fatal("the session's events are still being delivered after 5s")
		}
		time.Sleep(time.Millisecond)
	}
	me := goid()
	term, err := c.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unlock(ctx, term); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []simba.EventKind{simba.EventElected, simba.EventRevoked}
	if len(events) != len(want) {
		t.Fatalf("events of x when Unlock returned: %v; want %v, delivered before", events, want)
	}
	for i, e := range events {
		if e.kind != want[i] || e.g != me {
			t.Errorf("event %d: %v on goroutine %d; want %v on the caller's, %d", i, e.kind, e.g, want[i], me)
		}
	}
}
