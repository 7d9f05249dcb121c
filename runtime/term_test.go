package runtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
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

// E1: an ended term, and a term whose deadline has passed, fail EnsureValid
// whatever the minimum asked, negative ones included; a valid term passes a
// negative minimum.
func TestEnsureValidEndedTermAlwaysFails(t *testing.T) {
	mins := []time.Duration{-1 << 63, -time.Hour, -time.Nanosecond, 0, time.Nanosecond, time.Hour}
	live := deadline{epoch: time.Now()}
	live.set(mono(time.Hour))
	passed := deadline{epoch: time.Now()}
	passed.set(0)

	ended := newTerm(nil, "report", 7, &live)
	ended.end(ReasonStopped)
	expired := newTerm(nil, "report", 8, &passed)
	valid := newTerm(nil, "report", 9, &live)
	for _, min := range mins {
		for _, term := range []*Term{ended, expired} {
			err := term.EnsureValid(min)
			var te *TermExpiredError
			if !errors.Is(err, ErrTermExpired) || !errors.As(err, &te) || te.Remaining != 0 || te.Min != min {
				t.Errorf("%v (valid %v) EnsureValid(%v) = %v, want a *TermExpiredError with 0 remaining", term, term.Valid(), min, err)
			}
		}
		if min < time.Minute {
			if err := valid.EnsureValid(min); err != nil {
				t.Errorf("valid term EnsureValid(%v) = %v, want nil", min, err)
			}
		}
	}
}

// EndedAt is the moment Valid turned false for good: when the term was
// revoked, or its deadline if that passed first; zero while not ended.
func TestTermEndedAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		epoch := time.Now()
		d := deadline{epoch: epoch}
		d.set(mono(10 * time.Second))

		revoked := newTerm(nil, "report", 7, &d)
		time.Sleep(3 * time.Second)
		if !revoked.EndedAt().IsZero() {
			t.Fatalf("EndedAt of a valid term = %v; want zero", revoked.EndedAt())
		}
		revoked.end(ReasonStopped)
		if got, want := revoked.EndedAt(), epoch.Add(3*time.Second); !got.Equal(want) {
			t.Errorf("EndedAt of a term revoked at 3s = %v; want %v", got.Sub(epoch), want.Sub(epoch))
		}

		lapsed := newTerm(nil, "report", 8, &d)
		time.Sleep(9 * time.Second) // 12s: the deadline (10s) passed first
		if lapsed.Valid() || !lapsed.EndedAt().IsZero() {
			t.Fatalf("past its deadline, not yet ended: Valid %v, EndedAt %v; want false, zero", lapsed.Valid(), lapsed.EndedAt())
		}
		lapsed.end(ReasonDeadlinePassed)
		if got, want := lapsed.EndedAt(), epoch.Add(10*time.Second); !got.Equal(want) {
			t.Errorf("EndedAt of a term ended at 12s whose deadline was 10s = %v; want %v", got.Sub(epoch), want.Sub(epoch))
		}
	})
}
