package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Event is one line `simba watch --json` prints: the first read's whole
// inventory, then one line per change seen between two reads, and a line
// for each read that failed.
type Event struct {
	// Kind is what the line reports:
	//   inventory       the first read (Inventory is set)
	//   acquired        a free lease is held (To)
	//   handoff         a lease moved to another session (From, To)
	//   new_term        the same session holds a lease with a new token (From, To)
	//   freed           a lease is free (From; Ended: its session ended too)
	//   session_opened  a session appeared (Session)
	//   session_ended   a session is gone: closed, or expired (Session)
	//   error           a read failed (Error); watch goes on
	Kind      string     `json:"kind"`
	Time      time.Time  `json:"time"` // this host's clock when the read returned
	Inventory *Inventory `json:"inventory,omitempty"`
	Lease     string     `json:"lease,omitempty"`
	From      *Ref       `json:"from,omitempty"`
	To        *Ref       `json:"to,omitempty"`
	Ended     bool       `json:"ended,omitempty"`
	Session   *Ref       `json:"session,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Ref names a holder or a session in an [Event].
type Ref struct {
	Session  string `json:"session"`
	Identity string `json:"identity"`
	Token    int64  `json:"token,omitempty"` // the holder's token; omitted for a session
}

// diff returns the changes from prev to cur: leases by name, then the
// sessions that ended, then those that opened.
func diff(prev, cur Inventory, at time.Time) []Event {
	var out []Event
	was := make(map[string]Lease, len(prev.Leases))
	for _, l := range prev.Leases {
		was[l.Name] = l
	}
	is := make(map[string]Lease, len(cur.Leases))
	for _, l := range cur.Leases {
		is[l.Name] = l
	}
	live := make(map[string]bool, len(cur.Sessions))
	for _, s := range cur.Sessions {
		live[s.ID] = true
	}
	names := make([]string, 0, len(was)+len(is))
	for n := range was {
		names = append(names, n)
	}
	for n := range is {
		if _, ok := was[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	ref := func(l Lease) *Ref { return &Ref{Session: l.Session, Identity: l.Identity, Token: l.Token} }
	for _, n := range names {
		p, hadP := was[n]
		c, hasC := is[n]
		switch {
		case !hadP:
			out = append(out, Event{Kind: "acquired", Time: at, Lease: n, To: ref(c)})
		case !hasC:
			out = append(out, Event{Kind: "freed", Time: at, Lease: n, From: ref(p), Ended: !live[p.Session]})
		case p.Session != c.Session:
			out = append(out, Event{Kind: "handoff", Time: at, Lease: n, From: ref(p), To: ref(c)})
		case p.Token != c.Token:
			out = append(out, Event{Kind: "new_term", Time: at, Lease: n, From: ref(p), To: ref(c)})
		}
	}
	sessions := func(inv Inventory) map[string]Session {
		m := make(map[string]Session, len(inv.Sessions))
		for _, s := range inv.Sessions {
			m[s.ID] = s
		}
		return m
	}
	before, after := sessions(prev), sessions(cur)
	for _, s := range prev.Sessions {
		if _, ok := after[s.ID]; !ok {
			out = append(out, Event{Kind: "session_ended", Time: at, Session: &Ref{Session: s.ID, Identity: s.Identity}})
		}
	}
	for _, s := range cur.Sessions {
		if _, ok := before[s.ID]; !ok {
			out = append(out, Event{Kind: "session_opened", Time: at, Session: &Ref{Session: s.ID, Identity: s.Identity}})
		}
	}
	return out
}

// text is the event in words, for the line-oriented and terminal views.
func (e Event) text() string {
	who := func(r *Ref) string { return orDash(r.Identity) + " (" + shortID(r.Session) + ")" }
	switch e.Kind {
	case "acquired":
		return fmt.Sprintf("%s: acquired by %s, token %d", e.Lease, who(e.To), e.To.Token)
	case "handoff":
		return fmt.Sprintf("%s: HANDOFF %s token %d → %s token %d", e.Lease, who(e.From), e.From.Token, who(e.To), e.To.Token)
	case "new_term":
		return fmt.Sprintf("%s: new term for %s, token %d → %d", e.Lease, who(e.To), e.From.Token, e.To.Token)
	case "freed":
		s := fmt.Sprintf("%s: free, was %s token %d", e.Lease, who(e.From), e.From.Token)
		if e.Ended {
			s += " (its session ended)"
		}
		return s
	case "session_opened":
		return fmt.Sprintf("session %s opened by %s", shortID(e.Session.Session), orDash(e.Session.Identity))
	case "session_ended":
		return fmt.Sprintf("session %s of %s ended", shortID(e.Session.Session), orDash(e.Session.Identity))
	case "error":
		return "error: " + e.Error
	}
	return e.Kind
}

func (e Event) line() string { return e.Time.Format("15:04:05.000") + "  " + e.text() }

// recentLines is how many changes the terminal view keeps under the table.
const recentLines = 12

// markReads is for how many reads the terminal view marks a lease that
// changed holder: long enough to be seen at any interval.
const markReads = 4

// watch reads the backend every interval and shows what changed: on a
// terminal, the table redrawn with the latest changes under it and the
// leases that just changed hands marked for a few reads; otherwise, the first table, then
// one line per change (or per JSON event).
func watch(ctx context.Context, o options, stdout, stderr io.Writer, tty bool) int {
	r, err := open(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	defer r.Close()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	enc := json.NewEncoder(stdout)
	var (
		prev   *Inventory
		recent []Event
		marked = make(map[string]int) // lease → reads left to mark it
		failed bool
	)
	for n := 0; o.count == 0 || n < o.count; n++ {
		if n > 0 && !sleep(ctx, o.interval) {
			break
		}
		inv, err := r.read(ctx)
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil && n > 0 {
				break // interrupted, or --for is over
			}
			if prev == nil {
				fmt.Fprintln(stderr, "simba:", err)
				return exitFailed
			}
			failed = true
			ev := Event{Kind: "error", Time: now, Error: err.Error()}
			switch {
			case o.json:
				enc.Encode(ev)
			case tty:
				recent = appendRecent(recent, ev)
				redraw(stdout, o, *prev, recent, nil)
			default:
				fmt.Fprintln(stderr, ev.line())
			}
			continue
		}
		failed = false
		if prev == nil {
			switch {
			case o.json:
				enc.Encode(Event{Kind: "inventory", Time: now, Inventory: &inv})
			case tty:
				redraw(stdout, o, inv, nil, nil)
			default:
				writeTable(stdout, inv)
				fmt.Fprintf(stdout, "\nwatching every %v; changes:\n", o.interval)
			}
			prev = &inv
			continue
		}
		changes := diff(*prev, inv, now)
		prev = &inv
		switch {
		case o.json:
			for _, ev := range changes {
				enc.Encode(ev)
			}
		case tty:
			for name, left := range marked {
				if left <= 1 {
					delete(marked, name)
				} else {
					marked[name] = left - 1
				}
			}
			for _, ev := range changes {
				recent = appendRecent(recent, ev)
				if ev.Lease != "" && ev.To != nil {
					marked[ev.Lease] = markReads
				}
			}
			redraw(stdout, o, inv, recent, marked)
		default:
			for _, ev := range changes {
				fmt.Fprintln(stdout, ev.line())
			}
		}
	}
	if failed {
		return exitFailed
	}
	return exitOK
}

func appendRecent(recent []Event, ev Event) []Event {
	recent = append(recent, ev)
	if len(recent) > recentLines {
		recent = slices.Delete(recent, 0, len(recent)-recentLines)
	}
	return recent
}

// redraw clears the terminal and draws the table, marking the leases that
// changed holder in the last few reads, with the recent changes under it.
func redraw(w io.Writer, o options, inv Inventory, recent []Event, marked map[string]int) {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J") // cursor home, clear screen
	fmt.Fprintf(&b, "simba watch: every %v, %s (Ctrl-C to stop)\n\n", o.interval, time.Now().Format("15:04:05"))
	var table strings.Builder
	writeTable(&table, inv)
	for line := range strings.Lines(table.String()) {
		name, _, _ := strings.Cut(line, " ")
		if marked[name] > 0 {
			line = strings.TrimSuffix(line, "\n") + "  « new holder\n"
		}
		b.WriteString(line)
	}
	if len(recent) > 0 {
		b.WriteString("\nrecent changes:\n")
		for _, ev := range recent {
			b.WriteString(ev.line() + "\n")
		}
	}
	io.WriteString(w, b.String())
}

// sleep waits d or until ctx ends; it reports whether it slept all of d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
