package locals

import (
	"context"
	"slices"
	"testing"
	stdtime "time" // the package declares time

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// The generated code runs although the package declares the names of its
// locals: Use calls the generated RegisterAll, whose wrapper (run2) calls
// run on each item that items returns (held in items2), and whose receiver
// parameter (c2) is not the client (c). Each call gets a valid term.
func TestLocalsRun(t *testing.T) {
	mu.Lock()
	calls = nil // from an earlier run, with -count
	mu.Unlock()
	cl, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	regs, err := Use(cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 2 {
		t.Fatalf("RegisterAll started %d registrations; want 2", len(regs))
	}
	var ns []int
	do := false
	deadline := stdtime.Now().Add(10 * stdtime.Second)
	for len(ns) < 3 || !do {
		if stdtime.Now().After(deadline) {
			t.Fatalf("in 10s run got %v and Do ran: %v; want run to get 1, 2, 3 and Do to run", ns, do)
		}
		stdtime.Sleep(10 * stdtime.Millisecond)
		ns, do = nil, false
		mu.Lock()
		for _, x := range calls {
			if x.token <= 0 || !x.valid {
				t.Errorf("%s called with token %d, valid %v; want a valid term with a token > 0", x.fn, x.token, x.valid)
			}
			if x.fn == "Do" {
				do = true
			} else {
				ns = append(ns, x.n)
			}
		}
		mu.Unlock()
	}
	for _, r := range regs {
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("Stop %s: %v", r.Name(), err)
		}
	}
	if !slices.Equal(ns[:3], []int{1, 2, 3}) {
		t.Errorf("run got %v; want 1, 2, 3 first", ns)
	}
}
