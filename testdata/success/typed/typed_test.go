package typed

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// G2: the generated wrapper iterates the source and passes the term, and
// so its token, with every item; an item's error ends the run, and the
// items after it wait for the next run.
func TestTypedSteps(t *testing.T) {
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	l := NewLedger(Batch{ID: 1}, Batch{ID: 2, Amount: -1}, Batch{ID: 3})
	reg, err := RegisterLedgerWrite(c, l)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for len(l.Written()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("written %v in 10s; want batches 1 and 3", l.Written())
		}
		time.Sleep(10 * time.Millisecond)
	}
	w := l.Written()
	if len(w) != 2 || w[0].Batch.ID != 1 || w[1].Batch.ID != 3 {
		t.Fatalf("written %v; want batches 1 and 3 (2 failed and ended its run)", w)
	}
	for _, x := range w {
		if x.Token <= 0 || x.Token != w[0].Token {
			t.Errorf("batch %d written with token %d; want one token > 0 for the term", x.Batch.ID, x.Token)
		}
	}
}

// E1, G2: the wrapper checks the term before each item, with the step of
// the directive (10ms): once the term has no more than that left, the next
// item is not started and the run ends. Here the store becomes unreachable
// while batch 1 is written, and Write returns only when the term has 10ms
// or less to live; batch 2 must never be written.
func TestEnsureValidBeforeEachItem(t *testing.T) {
	store := memory.New()
	c, err := runtime.NewClient(store, runtime.ConfigFor(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	l := NewLedger(Batch{ID: 1}, Batch{ID: 2})
	ended := make(chan *runtime.Term, 1)
	l.OnWrite = func(b Batch, term *runtime.Term) {
		if b.ID != 1 {
			return
		}
		store.Faults().SetReachability(memory.Refuse) // no more renewals
		for term.Remaining() > 10*time.Millisecond {
			time.Sleep(time.Millisecond)
		}
		ended <- term
	}
	reg, err := RegisterLedgerWrite(c, l)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop(context.Background())
	var term *runtime.Term
	select {
	case term = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("batch 1 was not written in 10s")
	}
	<-term.Done()
	time.Sleep(100 * time.Millisecond)
	if w := l.Written(); len(w) != 1 || w[0].Batch.ID != 1 {
		t.Fatalf("written %v; want batch 1 only: the check before batch 2 fails", w)
	}
}
