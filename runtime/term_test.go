package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// T3: Valid, Remaining and a passing EnsureValid allocate nothing.
func TestTermReadsDoNotAllocate(t *testing.T) {
	d := deadline{epoch: time.Now()}
	d.set(mono(time.Hour))
	term := newTerm(nil, "report", 7, &d)
	allocs := testing.AllocsPerRun(1000, func() {
		if !term.Valid() || term.Remaining() <= 0 || term.EnsureValid(time.Second) != nil {
			t.Fatal("term not valid")
		}
	})
	if allocs != 0 {
		t.Fatalf("Valid/Remaining/EnsureValid allocate %v times per call, want 0", allocs)
	}
}

// BenchmarkTermValid measures Valid and Remaining (target: 0 allocations).
func BenchmarkTermValid(b *testing.B) {
	d := deadline{epoch: time.Now()}
	d.set(mono(time.Hour))
	term := newTerm(nil, "report", 7, &d)
	b.ReportAllocs()
	for b.Loop() {
		if !term.Valid() || term.Remaining() <= 0 {
			b.Fatal("invalid")
		}
	}
}

// T2: Done and Context are made on demand, the same on every call, and
// closed (cancelled with the reason) when the term ends, also when first
// asked for after it ended; a term nobody asks keeps neither.
func TestTermSignalsOnDemand(t *testing.T) {
	d := deadline{epoch: time.Now()}
	d.set(mono(time.Hour))
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	early := newTerm(nil, "report", 7, &d)
	done, ctx := early.Done(), early.Context()
	if early.Done() != done || early.Context() != ctx {
		t.Fatal("Done or Context returned a different value on a second call")
	}
	if closed(done) || ctx.Err() != nil {
		t.Fatal("a valid term's Done is closed or its context ended")
	}
	early.end(ReasonStopped)
	if !closed(done) || !errors.Is(context.Cause(ctx), ReasonStopped) {
		t.Errorf("after end: Done closed %v, context cause %v; want closed and %v", closed(done), context.Cause(ctx), ReasonStopped)
	}

	late := newTerm(nil, "report", 8, &d)
	late.end(ReasonSteppedDown)
	if !closed(late.Done()) || !errors.Is(context.Cause(late.Context()), ReasonSteppedDown) {
		t.Errorf("asked after end: Done closed %v, context cause %v; want closed and %v",
			closed(late.Done()), context.Cause(late.Context()), ReasonSteppedDown)
	}

	unasked := newTerm(nil, "report", 9, &d)
	unasked.end(ReasonStopped)
	if unasked.sig != nil {
		t.Errorf("a term never asked for Done or Context made its signals")
	}
}
