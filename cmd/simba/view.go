package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/schedulerecord"
)

// inventorySchema is the "schema" of the JSON document status --json prints.
const inventorySchema = "simba.inventory/v1"

// Inventory is what `simba status --json` prints: the store's leases,
// sessions and groups, as documented in the package documentation.
type Inventory struct {
	Schema    string    `json:"schema"`
	Backend   string    `json:"backend"`             // the backend URL, credentials redacted
	StoreTime time.Time `json:"store_time,omitzero"` // the store's clock when it was read
	Leases    []Lease   `json:"leases"`              // held leases, by name
	Sessions  []Session `json:"sessions"`            // live sessions, by id
	Groups    []Group   `json:"groups"`              // groups with members, by name

	// Recovering is set while the store's amnesia guard refuses every
	// grant; omitted otherwise.
	Recovering *Recovering `json:"recovering,omitempty"`
}

// Recovering is the store's amnesia guard in an [Inventory].
type Recovering struct {
	RemainingMS int64     `json:"remaining_ms"`   // until grants resume
	Until       time.Time `json:"until,omitzero"` // when, on the store's clock; omitted where it has none
	MaxLeaseMS  int64     `json:"max_lease_ms"`   // the guard's length, the store's longest lease
	Why         string    `json:"why"`            // what the store may have lost
}

// Lease is one held lease in an [Inventory].
type Lease struct {
	Name        string      `json:"name"`
	Session     string      `json:"session"`      // the holder's session
	Identity    string      `json:"identity"`     // the holder's identity, "" if it gave none
	Token       int64       `json:"token"`        // the holder's fencing token
	RemainingMS *int64      `json:"remaining_ms"` // the holder's session's time left; null if the store does not measure it
	Group       string      `json:"group,omitempty"`
	Partition   *int        `json:"partition,omitempty"` // with group: the partition this lease is
	LastSlot    *ScheduleAt `json:"last_slot,omitempty"` // what a schedule last recorded under this lease
}

// ScheduleAt is a schedule's record in a [Lease].
type ScheduleAt struct {
	Kind string    `json:"kind"` // rate: At is the last completed slot's start; delay: when the last run ended
	At   time.Time `json:"at"`
}

// Session is one live session in an [Inventory].
type Session struct {
	ID          string `json:"id"`
	Identity    string `json:"identity"`
	RemainingMS *int64 `json:"remaining_ms"` // null if the store does not measure it
	Leases      int    `json:"leases"`       // leases it holds
}

// Group is one group in an [Inventory].
type Group struct {
	Name       string   `json:"name"`
	Partitions int      `json:"partitions"`
	Members    []string `json:"members"` // live members' session ids, sorted
	Held       int      `json:"held"`    // partitions held
	Free       []int    `json:"free"`    // partitions nobody holds, ascending
}

// newInventory turns what the backend listed into the command's view: each
// lease with its holder's remaining time, its group and partition, and a
// schedule's last slot.
func newInventory(backend string, inv backends.Inventory) Inventory {
	out := Inventory{Schema: inventorySchema, Backend: backend, StoreTime: utc(inv.StoreTime),
		Leases: []Lease{}, Sessions: []Session{}, Groups: []Group{}}
	if r := inv.Recovering; r != nil {
		out.Recovering = &Recovering{RemainingMS: r.Remaining.Milliseconds(), Until: utc(r.Until),
			MaxLeaseMS: r.MaxLease.Milliseconds(), Why: r.Why}
	}
	remaining := make(map[backends.SessionID]time.Duration, len(inv.Sessions))
	for _, s := range inv.Sessions {
		remaining[s.ID] = s.Remaining
		out.Sessions = append(out.Sessions, Session{ID: string(s.ID), Identity: s.Identity,
			RemainingMS: millis(s.Remaining), Leases: s.Leases})
	}
	groups := make(map[string]*Group, len(inv.Groups))
	for _, g := range inv.Groups {
		members := make([]string, 0, len(g.Members))
		for _, m := range g.Members {
			members = append(members, string(m))
		}
		out.Groups = append(out.Groups, Group{Name: g.Name, Partitions: g.Partitions, Members: members})
	}
	for i := range out.Groups {
		groups[out.Groups[i].Name] = &out.Groups[i]
	}
	held := make(map[string]map[int]bool)
	for _, l := range inv.Leases {
		v := Lease{Name: l.Name, Session: string(l.Session), Identity: l.Identity, Token: int64(l.Token),
			RemainingMS: millis(remaining[l.Session])}
		if name, i, ok := backends.SplitPartition(l.Name); ok {
			if g := groups[name]; g != nil && i < g.Partitions {
				v.Group, v.Partition = name, &i
				if held[name] == nil {
					held[name] = make(map[int]bool)
				}
				held[name][i] = true
			}
		}
		if rec, ok := schedulerecord.Decode(l.Value); ok {
			v.LastSlot = &ScheduleAt{Kind: rec.Kind, At: rec.At.UTC()}
		}
		out.Leases = append(out.Leases, v)
	}
	for i := range out.Groups {
		g := &out.Groups[i]
		g.Free = []int{}
		for p := range g.Partitions {
			if held[g.Name][p] {
				g.Held++
			} else {
				g.Free = append(g.Free, p)
			}
		}
	}
	slices.SortFunc(out.Leases, func(a, b Lease) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// millis is d in whole milliseconds, or nil when the store did not measure
// it (0).
func millis(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// only keeps the leases named name, or the partitions of the group name,
// and the sessions and groups they involve.
func (inv Inventory) only(name string) Inventory {
	out := inv
	out.Leases, out.Groups, out.Sessions = []Lease{}, []Group{}, []Session{}
	sessions := make(map[string]bool)
	for _, l := range inv.Leases {
		if l.Name == name || l.Group == name {
			out.Leases = append(out.Leases, l)
			sessions[l.Session] = true
		}
	}
	for _, g := range inv.Groups {
		if g.Name == name {
			out.Groups = append(out.Groups, g)
			for _, m := range g.Members {
				sessions[m] = true
			}
		}
	}
	for _, s := range inv.Sessions {
		if sessions[s.ID] {
			out.Sessions = append(out.Sessions, s)
		}
	}
	return out
}

// writeTable prints inv for people: a header line, then the leases, the
// groups and the sessions, each as an aligned table.
func writeTable(w io.Writer, inv Inventory) {
	fmt.Fprintf(w, "%s", inv.Backend)
	if !inv.StoreTime.IsZero() {
		fmt.Fprintf(w, " at %s (store clock)", inv.StoreTime.Format("2006-01-02 15:04:05.000Z07:00"))
	}
	fmt.Fprintf(w, ": %s, %s, %s\n", plural(len(inv.Leases), "lease"), plural(len(inv.Sessions), "session"),
		plural(len(inv.Groups), "group"))
	if r := inv.Recovering; r != nil {
		fmt.Fprintf(w, "\n%s\n", recoveringLine(r))
	}
	if len(inv.Leases) == 0 {
		fmt.Fprintln(w, "\nno lease is held")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LEASE\tHOLDER\tSESSION\tTOKEN\tREMAINING\tGROUP\tPART\tLAST SLOT")
		for _, l := range inv.Leases {
			group, part := "-", "-"
			if l.Partition != nil {
				group, part = l.Group, strconv.Itoa(*l.Partition)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", l.Name, orDash(l.Identity), shortID(l.Session),
				l.Token, remaining(l.RemainingMS), group, part, lastSlot(l.LastSlot, inv.StoreTime))
		}
		tw.Flush()
	}
	if len(inv.Groups) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tPARTITIONS\tMEMBERS\tHELD\tFREE")
		for _, g := range inv.Groups {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", g.Name, g.Partitions, len(g.Members), g.Held, intList(g.Free))
		}
		tw.Flush()
	}
	if len(inv.Sessions) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tIDENTITY\tREMAINING\tLEASES")
		for _, s := range inv.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", shortID(s.ID), orDash(s.Identity), remaining(s.RemainingMS), s.Leases)
		}
		tw.Flush()
	}
}

// shortIDLen is how much of a session id the tables show: enough to tell
// sessions apart by eye; --json has the whole id. The tables show its end,
// which differs between sessions on every store (a ZooKeeper session id
// starts with the server's id and its start time, the same for every
// session of one server run).
const shortIDLen = 8

func shortID(id string) string {
	if len(id) <= shortIDLen {
		return id
	}
	return "…" + id[len(id)-shortIDLen:]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func remaining(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return duration(time.Duration(*ms) * time.Millisecond)
}

// duration prints d to a tenth of a second below a minute, to the second
// above.
func duration(d time.Duration) string {
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

func lastSlot(s *ScheduleAt, now time.Time) string {
	if s == nil {
		return "-"
	}
	out := s.At.Format("2006-01-02 15:04:05.000Z")
	if s.Kind == "delay" {
		out = "ended " + out
	}
	if !now.IsZero() {
		if ago := now.Sub(s.At); ago >= 0 {
			out += " (" + duration(ago) + " ago)"
		}
	}
	return out
}

func intList(xs []int) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// recoveringLine says why the store grants nothing and until when: "grants
// resume in 41.0s: the store is new or lost its state; …".
func recoveringLine(r *Recovering) string {
	line := "grants resume in " + duration(time.Duration(r.RemainingMS)*time.Millisecond)
	if !r.Until.IsZero() {
		line += " (at " + r.Until.Format("15:04:05.000Z") + " on the store's clock)"
	}
	line += ": the store is new or lost its state, and waits out its longest lease"
	if r.MaxLeaseMS > 0 {
		line += " (" + (time.Duration(r.MaxLeaseMS) * time.Millisecond).String() + ")"
	}
	return line + ", which an old holder may still believe it holds; simba_max_lease= in the backend URL " +
		"shortens the wait; see docs/design.md §15"
}
