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
// locals: Use calls the generated RegisterAll, whose wrapper (steps) calls
// run on each item that items returns (held in batch), whose receiver
// parameter (c) is not the client (client), and whose wrapper for T.Apply
// names its term term, as the receiver is t; the receiver of
// (*Error).Report is e, as the method names it. Each call gets a valid
// term.
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
	if len(regs) != 4 {
		t.Fatalf("RegisterAll started %d registrations; want 4", len(regs))
	}
	var ns []int
	do, report, apply := false, false, 0
	deadline := stdtime.Now().Add(10 * stdtime.Second)
	for len(ns) < 3 || !do || !report || apply == 0 {
		if stdtime.Now().After(deadline) {
			t.Fatalf("in 10s run got %v, Do ran: %v, Report ran: %v, Apply got an item of length %d; want run to get 1, 2, 3, Do and Report to run, Apply to get \"abcd\"",
				ns, do, report, apply)
		}
		stdtime.Sleep(10 * stdtime.Millisecond)
		ns, do, report, apply = nil, false, false, 0
		mu.Lock()
		for _, x := range calls {
			if x.token <= 0 || !x.valid {
				t.Errorf("%s called with token %d, valid %v; want a valid term with a token > 0", x.fn, x.token, x.valid)
			}
			switch x.fn {
			case "Do":
				do = true
			case "Report":
				report = true
			case "Apply":
				apply = x.n
			default:
				ns = append(ns, x.n)
			}
		}
		mu.Unlock()
	}
	if apply != 4 {
		t.Errorf("Apply got an item of length %d; want 4 (\"abcd\")", apply)
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
