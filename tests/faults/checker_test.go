package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"
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
// begin.
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
		slices.SortFunc(ts, func(a, b *term) int { return cmp64(a.begin, b.begin) })
	}
	return out
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
	violations []string // overlaps, token order, stale writes: each a failure
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

// check verifies a schedule's events and fenced writes: validity intervals
// of one name never overlap, tokens increase with the terms' order, and the
// fence never accepted a write with a lower token than one it accepted
// before; and it measures the gaps around each fault.
func check(p plan, events []event, fe *fence, faults []appliedFault, end int64) *report {
	r := &report{seed: p.Seed}
	terms := buildTerms(events)
	for _, name := range p.Names {
		ts := terms[name]
		r.terms += len(ts)
		// No overlap: each term begins after every earlier term's validity
		// ended.
		var prev *term
		for _, t := range ts {
			if prev != nil && t.begin < prev.validEnd() {
				r.overlaps++
				r.violations = append(r.violations, fmt.Sprintf("overlap on %s: %s token %d valid until %s, %s token %d began at %s (%v before)",
					name, prev.proc, prev.token, stamp(prev.validEnd()), t.proc, t.token, stamp(t.begin),
					time.Duration(prev.validEnd()-t.begin)))
			}
			if prev != nil && t.token <= prev.token {
				r.violations = append(r.violations, fmt.Sprintf("token order on %s: %s token %d began after %s token %d",
					name, t.proc, t.token, prev.proc, prev.token))
			}
			if prev == nil || t.validEnd() > prev.validEnd() {
				prev = t
			}
		}
		// Fenced writes: never a lower token than one accepted before; each
		// from a term some node logged; late ones (after a higher token's
		// term began) counted.
		ws, refused := fe.writes(name)
		r.writes += len(ws)
		r.refused += refused
		known := map[int64]*term{}
		for _, t := range ts {
			known[t.token] = t
		}
		var highest int64
		for _, w := range ws {
			if w.Token < highest {
				r.stale++
				r.violations = append(r.violations, fmt.Sprintf("stale write accepted on %s: %s token %d seq %d after token %d",
					name, w.Node, w.Token, w.Seq, highest))
			}
			highest = max(highest, w.Token)
			if known[w.Token] == nil {
				r.violations = append(r.violations, fmt.Sprintf("write on %s with token %d from %s: no term logged with it", name, w.Token, w.Node))
			}
			for _, t := range ts {
				if t.token > w.Token && t.begin < w.Mono {
					r.late++
					break
				}
			}
		}
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

// stamp formats a CLOCK_MONOTONIC reading in seconds.
func stamp(ns int64) string { return fmt.Sprintf("%.6fs", float64(ns)/1e9) }

// describe is the schedule's figures, for the verbose log.
func (r *report) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d terms, %d writes accepted, %d stale refused, %d late", r.terms, r.writes, r.refused, r.late)
	for i, f := range r.faults {
		fmt.Fprintf(&b, "; %d. %s %s: gap %v, recovery %v", i+1, f.kind, f.target, f.gap.Round(time.Millisecond), f.recovery.Round(time.Millisecond))
	}
	return b.String()
}
