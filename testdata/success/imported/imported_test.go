package imported

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
	m "github.com/simba-go/simba/testdata/success/imported/model"
)

// G2: the generated wrappers deliver items of types from other packages —
// a plain struct, a generic type instantiated with a type of a third
// package, a map of an alias — to the annotated functions, each with a
// valid term, whether the source yields an iter.Seq2 or returns a slice.
func TestImportedItems(t *testing.T) {
	mu.Lock()
	calls = nil // from an earlier run, with -count
	mu.Unlock()
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	regs, err := RegisterAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 3 {
		t.Fatalf("RegisterAll started %d registrations; want 3", len(regs))
	}
	want := map[string][]any{
		"Fulfil":   {m.Order{ID: "o1"}, m.Order{ID: "o2"}},
		"Paginate": {m.Page[time.Duration]{Items: []time.Duration{time.Second, time.Minute}, Next: "p2"}},
		"Punch": {
			map[Ticket][]*m.Order{{ID: "t0"}: {{ID: "o0"}}},
			map[Ticket][]*m.Order{{ID: "t1"}: {{ID: "o1"}}},
		},
	}
	got := make(map[string][]any)
	deadline := time.Now().Add(10 * time.Second)
	for {
		clear(got)
		mu.Lock()
		for _, x := range calls {
			if x.token <= 0 || !x.valid {
				t.Errorf("%s(%v) called with token %d, valid %v; want a valid term with a token > 0", x.fn, x.item, x.token, x.valid)
			}
			got[x.fn] = append(got[x.fn], x.item)
		}
		mu.Unlock()
		if len(got["Fulfil"]) >= 2 && len(got["Paginate"]) >= 1 && len(got["Punch"]) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in 10s the annotated functions got %v; want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, r := range regs {
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("Stop %s: %v", r.Name(), err)
		}
	}
	// The two partitions run in either order.
	if p := got["Punch"]; len(p) == 2 {
		if _, ok := p[0].(map[Ticket][]*m.Order)[Ticket{ID: "t1"}]; ok {
			p[0], p[1] = p[1], p[0]
		}
	}
	for fn, items := range want {
		if !reflect.DeepEqual(got[fn][:len(items)], items) {
			t.Errorf("%s got %v; want %v", fn, got[fn], items)
		}
	}
}
