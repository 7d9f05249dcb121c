// Package termcheck checks the invariant every other guarantee of Simba rests
// on, from a record of what the nodes did: never more valid terms of one name
// at once than allowed — one, for a lease (D3) — tokens strictly increasing in
// the order the terms began (T2, F5), elected and revoked callbacks in pairs
// (L1), and no fenced write accepted with a token lower than one accepted
// before (F1, F2). Rule names refer to docs/design.md in the repository.
//
// It works on plain data, so that every kind of test can use it: tests of
// package runtime in virtual time (testing/synctest), the backends' end-to-end
// tests in real time (a [Recorder] fed by the nodes' callbacks), the
// simulator's true time, and the multi-process fault tests, which rebuild the
// terms from the nodes' logs (CLOCK_MONOTONIC). An instant is a
// time.Duration since an epoch of the caller's choosing, the same for every
// term and write of one check.
//
// A checker that cannot fail proves nothing: the package's tests feed it each
// violation and require it to be reported.
package termcheck

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Term is one term of a lease name as one node held it: from when the node
// could act on it to when its validity had surely ended.
type Term struct {
	Name  string
	Node  string
	Token int64

	// Start is when the node could first act on the term (its elected
	// callback ran, its task began). Observing it late is safe: a term
	// adopted just after another ended may be seen late, never early.
	Start time.Duration
	// End is by when the term's validity had surely ended: when it was seen
	// ended (Done closed, the task's end logged), or the last local deadline
	// the node held for it, whichever is earlier; for a term still valid,
	// the instant of the check. A term with End ≤ Start was never valid: it
	// takes part in the token order only.
	End time.Duration

	// Listened says that Elected and Revoked count the node's listener
	// callbacks for the term (L1); without it they are not checked.
	Listened bool
	// Elected and Revoked count the elected and revoked callbacks the
	// listener got for the term.
	Elected, Revoked int
	// Settled says that no callback is still to come for the term: its node
	// closed, or stopped the term's election, and returned (not crashed).
	// Only then must every elected callback have had its revoked one.
	Settled bool
}

// Write is one fenced write of a resource guarded by the tokens of one lease
// name (one resource per name), as the resource handled it.
type Write struct {
	Name     string // the lease name whose term's token the write carries
	Node     string
	Token    int64
	At       time.Duration // when the resource handled it
	Accepted bool          // the resource accepted it (else it refused it as stale)
}

// Kind is the kind of a violation.
type Kind string

// The violations [Check] reports.
const (
	// Overlap: more terms of a name valid at one instant than allowed.
	Overlap Kind = "overlap"
	// TokenOrder: a term's token not above that of the term that began
	// before it.
	TokenOrder Kind = "token order"
	// Pairing: an elected callback without exactly one revoked callback
	// after it, or a revoked callback without an elected one.
	Pairing Kind = "pairing"
	// StaleWrite: a write accepted with a token lower than one the resource
	// had accepted before.
	StaleWrite Kind = "stale write"
	// UnknownToken: a write accepted with a token that no recorded term of
	// its name had.
	UnknownToken Kind = "unknown token"
)

// Violation is one breach of the invariant.
type Violation struct {
	Kind Kind
	Name string // the lease name
	Msg  string // what happened, with nodes, tokens and instants
}

func (v Violation) String() string { return fmt.Sprintf("%s on %s: %s", v.Kind, v.Name, v.Msg) }

// Options tune [Check].
type Options struct {
	// AtMost is how many terms of one name may be valid at once: 1 (and 0,
	// the default) for a lease; more for a semaphore.
	AtMost int

	// Semaphores maps a semaphore's name to its size, for the terms of
	// permits whose lease names PermitOf maps to that semaphore: besides the
	// checks of each permit's own name (one valid term at a time, tokens
	// rising), at most that many permits of one semaphore may be valid at
	// once.
	Semaphores map[string]int
	// PermitOf returns the semaphore a lease name is a permit of, or false.
	// It is needed with Semaphores.
	PermitOf func(name string) (semaphore string, ok bool)
}

// Report is what [Check] found.
type Report struct {
	Terms      int         // terms checked
	Writes     int         // writes accepted
	Refused    int         // writes refused (stale, as they should be)
	Late       int         // writes accepted after a term with a higher token began: fencing allows them while that term has not written
	Violations []Violation // in the order of the names, then of the checks
}

// Count returns how many violations of kind k the report holds.
func (r Report) Count(k Kind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

// Err returns the violations as one error, a line each, or nil if there are
// none.
func (r Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	lines := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		lines[i] = v.String()
	}
	return errors.New(strings.Join(lines, "\n"))
}

// Check checks terms and writes. Terms of a name are taken in the order they
// began, those that began at the same instant in the order given; writes of
// a name in the order given, which must be the order the resource handled
// them. It does not change its arguments.
func Check(terms []Term, writes []Write, o Options) Report {
	atMost := max(o.AtMost, 1)
	byName := map[string][]Term{}
	var names []string
	for _, t := range terms {
		if _, ok := byName[t.Name]; !ok {
			names = append(names, t.Name)
		}
		byName[t.Name] = append(byName[t.Name], t)
	}
	writesOf := map[string][]Write{}
	for _, w := range writes {
		if _, ok := byName[w.Name]; !ok {
			if _, ok := writesOf[w.Name]; !ok {
				names = append(names, w.Name)
			}
		}
		writesOf[w.Name] = append(writesOf[w.Name], w)
	}
	slices.Sort(names)
	r := Report{Terms: len(terms)}
	for _, name := range names {
		ts := byName[name]
		slices.SortStableFunc(ts, func(a, b Term) int { return cmp.Compare(a.Start, b.Start) })
		r.checkOverlap(name, ts, atMost)
		r.checkTokens(name, ts)
		r.checkPairing(name, ts)
		r.checkWrites(name, ts, writesOf[name])
	}
	r.checkSemaphores(terms, o)
	return r
}

// checkSemaphores sweeps the terms of each semaphore's permits together, in
// the order they began: a permit that begins while as many as the
// semaphore's size are valid is an overlap of the semaphore.
func (r *Report) checkSemaphores(terms []Term, o Options) {
	if len(o.Semaphores) == 0 || o.PermitOf == nil {
		return
	}
	bySem := map[string][]Term{}
	for _, t := range terms {
		if sem, ok := o.PermitOf(t.Name); ok {
			bySem[sem] = append(bySem[sem], t)
		}
	}
	sems := make([]string, 0, len(o.Semaphores))
	for sem := range o.Semaphores {
		sems = append(sems, sem)
	}
	slices.Sort(sems)
	for _, sem := range sems {
		ts := bySem[sem]
		slices.SortStableFunc(ts, func(a, b Term) int { return cmp.Compare(a.Start, b.Start) })
		r.checkOverlap(sem, ts, max(o.Semaphores[sem], 1))
	}
}

func (r *Report) violate(k Kind, name, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: k, Name: name, Msg: fmt.Sprintf(format, args...)})
}

// checkOverlap sweeps the validity intervals [Start, End) of one name's
// terms, in the order they began: a term that begins while atMost others
// are valid is an overlap.
func (r *Report) checkOverlap(name string, ts []Term, atMost int) {
	var valid []Term // begun, and valid at the current start
	for _, t := range ts {
		if t.End <= t.Start {
			continue // never valid
		}
		valid = slices.DeleteFunc(valid, func(v Term) bool { return v.End <= t.Start })
		if len(valid) >= atMost {
			others := make([]string, len(valid))
			for i, v := range valid {
				others[i] = fmt.Sprintf("%s's token %d valid %s–%s", v.Node, v.Token, stamp(v.Start), stamp(v.End))
			}
			r.violate(Overlap, name, "%s's term with token %d began at %s while %s (at most %d at once)",
				t.Node, t.Token, stamp(t.Start), strings.Join(others, ", "), atMost)
		}
		valid = append(valid, t)
	}
}

// checkTokens: each term's token is above that of the term before it.
func (r *Report) checkTokens(name string, ts []Term) {
	for i := 1; i < len(ts); i++ {
		if prev, t := ts[i-1], ts[i]; t.Token <= prev.Token {
			r.violate(TokenOrder, name, "%s's term with token %d began at %s, after %s's with token %d at %s",
				t.Node, t.Token, stamp(t.Start), prev.Node, prev.Token, stamp(prev.Start))
		}
	}
}

// checkPairing: one elected callback per term, each followed by exactly one
// revoked callback once the term is settled, and never a revoked callback
// without an elected one.
func (r *Report) checkPairing(name string, ts []Term) {
	for _, t := range ts {
		if !t.Listened {
			continue
		}
		switch {
		case t.Elected > 1:
			r.violate(Pairing, name, "%s's term with token %d had %d elected callbacks; want one", t.Node, t.Token, t.Elected)
		case t.Revoked > t.Elected:
			r.violate(Pairing, name, "%s's term with token %d had %d revoked callbacks after %d elected", t.Node, t.Token, t.Revoked, t.Elected)
		case t.Settled && t.Revoked < t.Elected:
			r.violate(Pairing, name, "%s's term with token %d had its elected callback and no revoked one, and its node is done", t.Node, t.Token)
		}
	}
}

// checkWrites: the resource never accepted a token below one it accepted
// before, and every accepted token is one of the name's terms.
func (r *Report) checkWrites(name string, ts []Term, ws []Write) {
	tokens := map[int64]bool{}
	for _, t := range ts {
		tokens[t.Token] = true
	}
	var highest int64
	accepted := false
	for _, w := range ws {
		if !w.Accepted {
			r.Refused++
			continue
		}
		r.Writes++
		if accepted && w.Token < highest {
			r.violate(StaleWrite, name, "%s's write with token %d accepted at %s, after one with token %d", w.Node, w.Token, stamp(w.At), highest)
		}
		highest, accepted = max(highest, w.Token), true
		if !tokens[w.Token] {
			r.violate(UnknownToken, name, "%s's write with token %d accepted at %s: no term had that token", w.Node, w.Token, stamp(w.At))
		}
		for _, t := range ts {
			if t.Token > w.Token && t.Start < w.At {
				r.Late++
				break
			}
		}
	}
}

// stamp formats an instant as seconds since the epoch, to the microsecond.
func stamp(d time.Duration) string { return fmt.Sprintf("%.6fs", d.Seconds()) }
