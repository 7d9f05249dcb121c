package faults

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/testkit/termcheck"
)

// term is one term as its process logged it.
type term struct {
	proc   string
	name   string
	token  int64
	begin  int64 // the begin event: the task started with the term
	until  int64 // the latest deadline the process logged for it
	end    int64 // the end event, if ended
	ended  bool
	reason string
}

// validEnd is where the term's validity interval ends: at the earlier of its
// logged end and the latest deadline its process logged while it was valid.
func (t *term) validEnd() int64 {
	if t.ended && t.end < t.until {
		return t.end
	}
	return t.until
}

// buildTerms groups a schedule's events into terms, by name, sorted by
// begin (then token, so that the order is the same on every run).
func buildTerms(events []event) map[string][]*term {
	type key struct {
		proc, name string
		token      int64
	}
	byKey := map[key]*term{}
	for _, e := range events {
		if e.Ev == "rt" || e.Name == "" || e.Token == 0 {
			continue // the runtime's events are for the record only
		}
		k := key{e.Node, e.Name, e.Token}
		t := byKey[k]
		if t == nil {
			t = &term{proc: e.Node, name: e.Name, token: e.Token, begin: e.Mono}
			byKey[k] = t
		}
		switch e.Ev {
		case "begin":
			t.begin = e.Mono
		case "end":
			t.end, t.ended, t.reason = e.Mono, true, e.Result
		}
		t.begin = min(t.begin, e.Mono)
		t.until = max(t.until, e.Until)
	}
	out := map[string][]*term{}
	for _, t := range byKey {
		if t.until == 0 {
			// Never seen valid by its process (granted, then a pause
			// past its deadline before its task began): nothing to check,
			// and its late end would misplace it in the terms' order.
			continue
		}
		out[t.name] = append(out[t.name], t)
	}
	for _, ts := range out {
		slices.SortFunc(ts, func(a, b *term) int {
			return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.token, b.token))
		})
	}
	return out
}

// faultFigure is how one fault ended: the longest stretch with no holder of
// a name that began between the fault's start and the next fault's (or the
// schedule's end), and how long after the fault ended every name had a
// holder again.
type faultFigure struct {
	kind     string
	target   string
	gap      time.Duration
	recovery time.Duration
}

// report is the checker's verdict on one schedule.
type report struct {
	seed       int64
	violations []string // termcheck's violations, and liveness: each a failure
	terms      int
	writes     int // accepted fenced writes
	refused    int // stale writes the fence refused
	late       int // accepted writes that landed after a higher token's term began
	overlaps   int
	stale      int
	faults     []faultFigure
	races      int      // race reports inside go-zookeeper only
	raceSample string   // the first of them
	ourRaces   []string // race reports with an access in this module's code
	kept       string   // the directory of the nodes' logs, kept for a failure
}

// check verifies a schedule's events and fenced writes with package
// termcheck: validity intervals of one name never overlap, tokens increase
// with the terms' order, and the fence never accepted a write with a lower
// token than one it accepted before, nor one with a token no node logged a
// term for; and it measures the gaps around each fault.
func check(p plan, events []event, fe *fence, faults []appliedFault, end int64) *report {
	r := &report{seed: p.Seed}
	terms := buildTerms(events)
	var checked []termcheck.Term
	var writes []termcheck.Write
	for _, name := range p.Names {
		for _, t := range terms[name] {
			checked = append(checked, termcheck.Term{Name: name, Node: t.proc, Token: t.token,
				Start: time.Duration(t.begin), End: time.Duration(t.validEnd())})
		}
		ws, refused := fe.writes(name)
		r.refused += refused
		for _, w := range ws {
			writes = append(writes, termcheck.Write{Name: name, Node: w.Node, Token: w.Token, At: time.Duration(w.Mono), Accepted: true})
		}
	}
	verdict := termcheck.Check(checked, writes, termcheck.Options{})
	r.terms, r.writes, r.late = verdict.Terms, verdict.Writes, verdict.Late
	r.overlaps, r.stale = verdict.Count(termcheck.Overlap), verdict.Count(termcheck.StaleWrite)
	for _, v := range verdict.Violations {
		r.violations = append(r.violations, v.String())
	}
	// Liveness: the holderless stretches of each name.
	gaps := map[string][][2]int64{}
	for _, name := range p.Names {
		gaps[name] = holderless(terms[name], end)
	}
	for i, f := range faults {
		windowEnd := end
		if i+1 < len(faults) {
			windowEnd = faults[i+1].start
		}
		fig := faultFigure{kind: f.Kind, target: f.target}
		for _, name := range p.Names {
			for _, g := range gaps[name] {
				if g[0] >= f.start && g[0] < windowEnd { // the gaps that began in its window
					fig.gap = max(fig.gap, time.Duration(g[1]-g[0]))
				}
				if g[0] <= f.end && g[1] > f.end {
					fig.recovery = max(fig.recovery, time.Duration(g[1]-f.end))
				}
			}
		}
		r.faults = append(r.faults, fig)
	}
	return r
}

// holderless returns the stretches from the first term's begin to end in
// which no term of ts was valid.
func holderless(ts []*term, end int64) [][2]int64 {
	if len(ts) == 0 {
		return nil
	}
	var out [][2]int64
	covered := ts[0].begin
	for _, t := range ts {
		if t.begin > covered {
			out = append(out, [2]int64{covered, t.begin})
		}
		covered = max(covered, t.validEnd())
	}
	if covered < end {
		out = append(out, [2]int64{covered, end})
	}
	return out
}

// describe is the schedule's figures, for the verbose log.
func (r *report) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d terms, %d writes accepted, %d stale refused, %d late", r.terms, r.writes, r.refused, r.late)
	for i, f := range r.faults {
		fmt.Fprintf(&b, "; %d. %s %s: gap %v, recovery %v", i+1, f.kind, f.target, f.gap.Round(time.Millisecond), f.recovery.Round(time.Millisecond))
	}
	return b.String()
}
