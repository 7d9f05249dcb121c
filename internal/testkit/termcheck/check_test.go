package termcheck

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// term is a lease term of node with token, valid [start, end) in ms.
func term(node string, token int64, start, end int) Term {
	return Term{Name: "a", Node: node, Token: token, Start: ms(start), End: ms(end)}
}

// listened is term with its callbacks counted.
func listened(t Term, elected, revoked int, settled bool) Term {
	t.Listened, t.Elected, t.Revoked, t.Settled = true, elected, revoked, settled
	return t
}

func write(node string, token int64, at int, accepted bool) Write {
	return Write{Name: "a", Node: node, Token: token, At: ms(at), Accepted: accepted}
}

// A clean history passes: hand-overs end to start, rising tokens, paired
// callbacks, writes that only go up (a refused stale one among them).
func TestCleanHistoryPasses(t *testing.T) {
	terms := []Term{
		listened(term("n1", 5, 0, 100), 1, 1, true),
		listened(term("n2", 9, 100, 250), 1, 1, true),
		listened(term("n1", 12, 300, 400), 1, 0, false), // still running: no revoked callback yet
		{Name: "b", Node: "n2", Token: 3, Start: ms(50), End: ms(400)},
	}
	writes := []Write{write("n1", 5, 10, true), write("n1", 5, 20, true), write("n2", 9, 120, true),
		write("n1", 5, 130, false), write("n1", 12, 310, true)}
	r := Check(terms, writes, Options{})
	if err := r.Err(); err != nil {
		t.Fatalf("a clean history: %v", err)
	}
	if r.Terms != 4 || r.Writes != 4 || r.Refused != 1 || r.Late != 0 {
		t.Errorf("report %+v; want 4 terms, 4 writes accepted, 1 refused, none late", r)
	}
}

// Each violation is reported, by kind, and only it.
func TestViolationsCaught(t *testing.T) {
	for _, c := range []struct {
		name   string
		terms  []Term
		writes []Write
		atMost int
		want   Kind
		msg    string // a part of the message
	}{
		{"a term begins while another is valid", []Term{term("n1", 1, 0, 100), term("n2", 2, 99, 200)}, nil, 0,
			Overlap, "n2's term with token 2 began at 0.099000s while n1's token 1 valid 0.000000s–0.100000s"},
		// n3 begins while n1 is valid, after n1's term and a term never
		// valid: compared with the term before it alone, it would pass.
		{"a term inside another", []Term{term("n1", 1, 0, 500), term("n2", 2, 100, 100), term("n3", 3, 300, 400)}, nil, 0,
			Overlap, "n3's term with token 3 began at 0.300000s while n1's token 1"},
		{"three at once where two may be", []Term{term("n1", 1, 0, 100), term("n2", 2, 10, 100), term("n3", 3, 20, 100)}, nil, 2,
			Overlap, "at most 2 at once"},
		{"a lower token after a higher", []Term{term("n1", 7, 0, 100), term("n2", 6, 100, 200)}, nil, 0,
			TokenOrder, "n2's term with token 6 began at 0.100000s, after n1's with token 7"},
		{"the same token twice", []Term{term("n1", 7, 0, 100), term("n2", 7, 100, 200)}, nil, 0,
			TokenOrder, "token 7"},
		{"a lower token on a term never valid", []Term{term("n1", 7, 0, 100), term("n2", 3, 150, 150)}, nil, 0,
			TokenOrder, "token 3"},
		{"two elected callbacks", []Term{listened(term("n1", 1, 0, 100), 2, 2, true)}, nil, 0,
			Pairing, "2 elected callbacks"},
		{"a revoked callback without an elected one", []Term{listened(term("n1", 1, 0, 100), 0, 1, true)}, nil, 0,
			Pairing, "1 revoked callbacks after 0 elected"},
		{"two revoked callbacks", []Term{listened(term("n1", 1, 0, 100), 1, 2, true)}, nil, 0,
			Pairing, "2 revoked callbacks after 1 elected"},
		{"no revoked callback once settled", []Term{listened(term("n1", 1, 0, 100), 1, 0, true)}, nil, 0,
			Pairing, "no revoked one"},
		{"a stale write accepted", []Term{term("n1", 1, 0, 100), term("n2", 2, 100, 200)},
			[]Write{write("n2", 2, 150, true), write("n1", 1, 160, true)}, 0,
			StaleWrite, "n1's write with token 1 accepted at 0.160000s, after one with token 2"},
		{"a write of no term", []Term{term("n1", 1, 0, 100)}, []Write{write("n9", 4, 50, true)}, 0,
			UnknownToken, "n9's write with token 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.terms, c.writes, Options{AtMost: c.atMost})
			if len(r.Violations) != 1 || r.Violations[0].Kind != c.want || r.Count(c.want) != 1 {
				t.Fatalf("violations %v; want one %s", r.Violations, c.want)
			}
			if got := r.Violations[0].String(); !strings.Contains(got, c.msg) || !strings.HasPrefix(got, string(c.want)+" on a: ") {
				t.Errorf("violation %q; want it to start %q and contain %q", got, c.want+" on a: ", c.msg)
			}
			if r.Err() == nil {
				t.Error("Err() = nil with a violation")
			}
		})
	}
}

// What is not a violation is not reported: a term that begins the instant
// another ends, terms never valid, two at once where two may be, a term
// whose revoked callback may still come, writes refused, late writes
// (counted), terms of other names at the same time.
func TestNotViolations(t *testing.T) {
	terms := []Term{
		term("n1", 1, 0, 100),
		term("n2", 2, 100, 200), // begins as n1's ends
		term("n1", 3, 120, 110), // never valid (ended before its start was seen)
		term("n3", 4, 150, 150), // never valid either
		listened(term("n2", 5, 200, 300), 1, 0, false),
		{Name: "b", Node: "n1", Token: 1, Start: ms(50), End: ms(250)},
	}
	writes := []Write{write("n1", 1, 50, true), write("n1", 1, 210, true), write("n2", 2, 220, false)}
	r := Check(terms, writes, Options{})
	if err := r.Err(); err != nil {
		t.Fatalf("%v", err)
	}
	if r.Late != 1 || r.Refused != 1 {
		t.Errorf("late %d, refused %d; want 1 each (the write with token 1 after token 2's term began)", r.Late, r.Refused)
	}
	two := []Term{term("n1", 1, 0, 100), term("n2", 2, 10, 100), term("n3", 3, 100, 200)}
	if err := Check(two, nil, Options{AtMost: 2}).Err(); err != nil {
		t.Errorf("two at once where two may be: %v", err)
	}
}

// Terms that begin at the same instant are taken in the order given: the
// token order between them is that order's.
func TestSameInstantInOrderGiven(t *testing.T) {
	rising := []Term{term("n1", 1, 0, 0), term("n2", 2, 0, 0)}
	if err := Check(rising, nil, Options{}).Err(); err != nil {
		t.Errorf("rising tokens at one instant: %v", err)
	}
	falling := []Term{term("n2", 2, 0, 0), term("n1", 1, 0, 0)}
	if n := Check(falling, nil, Options{}).Count(TokenOrder); n != 1 {
		t.Errorf("falling tokens at one instant: %d token-order violations; want 1", n)
	}
}

// The recorder on a bubble's clock: terms begin and end at the instants
// they are recorded, a term not ended ends at the check, callbacks and
// settling are counted, writes kept in order.
func TestRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRecorder()
		a := r.Begin("a", "n1", 1)
		r.Elected(a)
		r.Write("a", "n1", 1, true)
		time.Sleep(100 * time.Millisecond)
		r.End(a)
		r.End(a) // the first end counts
		r.Revoked(a)
		b := r.Begin("a", "n2", 2)
		r.Elected(b)
		time.Sleep(50 * time.Millisecond)
		r.Settle("n1")
		terms := r.Terms()
		want := []Term{
			{Name: "a", Node: "n1", Token: 1, Start: 0, End: ms(100), Listened: true, Elected: 1, Revoked: 1, Settled: true},
			{Name: "a", Node: "n2", Token: 2, Start: ms(100), End: ms(150), Listened: true, Elected: 1},
		}
		if fmt.Sprint(terms) != fmt.Sprint(want) {
			t.Errorf("terms %+v; want %+v", terms, want)
		}
		if w := r.Writes(); len(w) != 1 || w[0] != (Write{Name: "a", Node: "n1", Token: 1, At: 0, Accepted: true}) {
			t.Errorf("writes %+v; want n1's at 0", w)
		}
		if err := r.Check(Options{}).Err(); err != nil {
			t.Errorf("%v", err)
		}
		if r.Len() != 2 {
			t.Errorf("Len() = %d; want 2", r.Len())
		}
		// n2 settles without its revoked callback: a pairing violation.
		r.Settle("n2")
		if n := r.Check(Options{}).Count(Pairing); n != 1 {
			t.Errorf("%d pairing violations after n2 settled without a revoked callback; want 1", n)
		}
	})
}

// The recorder is safe from many goroutines (run with -race); an overlap
// between goroutines that never hand over is caught.
func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("n%d", i)
			for j := range 50 {
				id := r.Begin(name, name, int64(j+1)) // one name per goroutine: no overlap
				r.Elected(id)
				r.Write(name, name, int64(j+1), true)
				r.End(id)
				r.Revoked(id)
			}
			r.Settle(name)
		})
	}
	wg.Wait()
	if err := r.Check(Options{}).Err(); err != nil {
		t.Fatalf("%v", err)
	}
	// Two nodes on one name, both valid: reported.
	r.Begin("shared", "x", 1)
	r.Begin("shared", "y", 2)
	if n := r.Check(Options{}).Count(Overlap); n != 1 {
		t.Errorf("%d overlaps with two open terms of one name; want 1", n)
	}
}

// A semaphore's permits are checked together: at most its size valid at
// once across its permits, each permit's tokens rising on their own (a
// permit's token may be below another permit's that began earlier).
func TestSemaphore(t *testing.T) {
	permit := func(i int, node string, token int64, from, to int) Term {
		return Term{Name: fmt.Sprintf("jobs.permit-%d", i), Node: node, Token: token, Start: ms(from), End: ms(to)}
	}
	o := Options{
		Semaphores: map[string]int{"jobs": 2},
		PermitOf: func(name string) (string, bool) {
			sem, _, ok := strings.Cut(name, ".permit-")
			return sem, ok
		},
	}
	fine := []Term{
		permit(0, "n1", 5, 0, 100),
		permit(1, "n2", 4, 10, 100), // a lower token than permit 0's: another lease's
		permit(0, "n3", 6, 100, 200),
		permit(1, "n4", 9, 150, 300),
		{Name: "other", Node: "n5", Token: 1, Start: ms(20), End: ms(300)},
	}
	if err := Check(fine, nil, o).Err(); err != nil {
		t.Errorf("two permits of two at once: %v", err)
	}
	three := append(slices.Clone(fine), permit(2, "n6", 7, 160, 170))
	r := Check(three, nil, o)
	if len(r.Violations) != 1 || r.Count(Overlap) != 1 || r.Violations[0].Name != "jobs" ||
		!strings.Contains(r.Violations[0].Msg, "at most 2 at once") {
		t.Errorf("three permits of two at once: violations %v; want one overlap on jobs", r.Violations)
	}
	samePermit := append(slices.Clone(fine), permit(1, "n7", 10, 200, 250))
	if n := Check(samePermit, nil, o).Count(Overlap); n != 1 {
		t.Errorf("two terms of one permit at once: %d overlaps; want 1 (the permit's own)", n)
	}
}

// EndAt records an end learned late at the instant it happened, so that a
// hand-off observed out of order is not taken for an overlap; a second end
// does not move it.
func TestRecorderEndAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRecorder()
		a := r.Begin("a", "n1", 1)
		time.Sleep(100 * time.Millisecond)
		ended := time.Now()
		time.Sleep(10 * time.Millisecond)
		b := r.Begin("a", "n2", 2) // at 110ms, after a's end at 100ms
		time.Sleep(10 * time.Millisecond)
		r.EndAt(a, ended) // learned at 120ms
		r.End(a)
		if got := r.Terms()[a].End; got != ms(100) {
			t.Errorf("End = %v; want 100ms, when it happened", got)
		}
		if err := r.Check(Options{}).Err(); err != nil {
			t.Errorf("%v", err)
		}
		r.End(b)
	})
}
