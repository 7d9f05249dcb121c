package simbahttp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/runtime"
)

// SchemaVersion is the value of [Status].Schema, the version of the JSON
// document the status handler serves. A change that removes or retypes a
// field gets a new version.
const SchemaVersion = "simba.status/v1"

// Status is the JSON document the status handler serves; the package
// documentation shows it field by field.
type Status struct {
	Schema   string    `json:"schema"`   // SchemaVersion
	Time     time.Time `json:"time"`     // when the snapshot was taken
	Identity string    `json:"identity"` // the client's identity
	Session  Session   `json:"session"`
	Leases   []Lease   `json:"leases"` // in start order; [] if none
	Groups   []Group   `json:"groups"` // in start order; [] if none

	// Recovering is set while the store refuses grants because it is new
	// or lost its state (the amnesia guard); omitted otherwise.
	Recovering *Recovering `json:"recovering,omitempty"`
}

// Recovering is the store's amnesia guard as the client met it, in a
// [Status].
type Recovering struct {
	Until       time.Time `json:"until,omitzero"` // when grants resume; omitted if the store does not say
	RemainingMS int64     `json:"remaining_ms"`   // until then
	MaxLeaseMS  int64     `json:"max_lease_ms"`   // the guard's length, the store's longest lease; 0 if unknown
	Why         string    `json:"why"`            // what the store may have lost
	Message     string    `json:"message"`        // why the client waits and until when, in one line
}

// Session is the client's session in a [Status].
type Session struct {
	ID            string `json:"id"`              // "" while none is open
	State         string `json:"state"`           // opening, live, suspended or closed
	RemainingMS   int64  `json:"remaining_ms"`    // until the local deadline; 0 if none
	RenewPeriodMS int64  `json:"renew_period_ms"` // the current renewal period
	LastError     string `json:"last_error,omitempty"`
}

// Lease is one election, lock or schedule of the client in a [Status].
type Lease struct {
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`         // election, lock or schedule
	Role        string    `json:"role"`         // candidate, leader, handing_off or cooling_down
	Token       int64     `json:"token"`        // the term's token while leader or handing_off, else 0
	RemainingMS int64     `json:"remaining_ms"` // the term's validity left while leader, else 0
	CooldownMS  int64     `json:"cooldown_ms"`  // the cooldown left while cooling_down, else 0
	Holder      *Holder   `json:"holder"`       // nil (null) if not read
	HolderError string    `json:"holder_error,omitempty"`
	Schedule    *Schedule `json:"schedule,omitempty"` // set for kind schedule
}

// Holder is who holds a lease, in a [Lease].
type Holder struct {
	Free     bool   `json:"free"`     // nobody holds the lease; the other fields are zero
	Session  string `json:"session"`  // the holding session
	Identity string `json:"identity"` // its identity, "" if it gave none
	Token    int64  `json:"token"`    // the holder's token
	Self     bool   `json:"self"`     // the holder is this client's session
}

// Schedule is a schedule's status, in a [Lease] or a [Partition].
type Schedule struct {
	Next      time.Time `json:"next,omitzero"`     // when the next run is due
	LastRun   time.Time `json:"last_run,omitzero"` // when the last run started
	LastError string    `json:"last_error,omitempty"`
	Runs      int       `json:"runs"` // runs started, over every term of this client
}

// Group is a partition group of the client in a [Status].
type Group struct {
	Name       string      `json:"name"`
	Partitions int         `json:"partitions"`
	Members    int         `json:"members"` // in the last view read
	Joined     bool        `json:"joined"`
	Held       []Partition `json:"held"` // ascending; [] if none
	LastError  string      `json:"last_error,omitempty"`
}

// Partition is a partition this member holds, in a [Group].
type Partition struct {
	Index       int       `json:"index"`
	Token       int64     `json:"token"`
	RemainingMS int64     `json:"remaining_ms"`
	Schedule    *Schedule `json:"schedule,omitempty"` // set when the group runs on a schedule
}

// StatusOptions configure [NewStatus].
type StatusOptions struct {
	// HolderTimeout bounds the reads of the holders of the leases this
	// client does not hold, together. Zero means one second.
	HolderTimeout time.Duration

	// SkipHolders leaves out the holders this client would have to read
	// from the store: a request then makes no call to the store.
	SkipHolders bool
}

// NewStatus returns a handler that serves client's status as JSON, the
// document [Status] describes. It answers GET and HEAD; other methods get
// 405.
func NewStatus(client *runtime.Client, opts StatusOptions) http.Handler {
	if opts.HolderTimeout <= 0 {
		opts.HolderTimeout = time.Second
	}
	return &statusHandler{client: client, opts: opts}
}

type statusHandler struct {
	client *runtime.Client
	opts   StatusOptions
}

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "simba: the status handler answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	st := StatusOf(r.Context(), h.client, h.opts)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st) // a failed write is the client's to see
}

// StatusOf builds the [Status] the handler serves, for callers that serve
// or log it their own way. ctx bounds the holder reads, with
// opts.HolderTimeout.
func StatusOf(ctx context.Context, client *runtime.Client, opts StatusOptions) Status {
	snap := client.Snapshot()
	st := Status{
		Schema:   SchemaVersion,
		Time:     time.Now().UTC(),
		Identity: client.Identity(),
		Session: Session{
			ID:            string(snap.Session),
			State:         snap.State.String(),
			RemainingMS:   snap.Remaining.Milliseconds(),
			RenewPeriodMS: snap.RenewPeriod.Milliseconds(),
			LastError:     errString(snap.LastError),
		},
		Leases: make([]Lease, 0, len(snap.Leases)),
		Groups: make([]Group, 0, len(snap.Groups)),
	}
	if r := snap.Recovering; r != nil {
		st.Recovering = &Recovering{Until: r.Until.UTC(), RemainingMS: r.Remaining.Milliseconds(),
			MaxLeaseMS: r.MaxLease.Milliseconds(), Why: r.Why, Message: RecoveringText(r)}
	}
	for _, ls := range snap.Leases {
		l := Lease{
			Name:        ls.Name,
			Kind:        "election",
			Role:        strings.ReplaceAll(ls.Role.String(), " ", "_"),
			Token:       int64(ls.Token),
			RemainingMS: ls.Remaining.Milliseconds(),
			CooldownMS:  ls.Cooldown.Milliseconds(),
			Schedule:    schedule(ls.Schedule),
		}
		switch {
		case ls.Lock:
			l.Kind = "lock"
		case ls.Schedule != nil:
			l.Kind = "schedule"
		}
		if ls.Role == runtime.RoleLeader && snap.Session != "" {
			l.Holder = &Holder{Session: string(snap.Session), Identity: client.Identity(), Token: int64(ls.Token), Self: true}
		}
		st.Leases = append(st.Leases, l)
	}
	if !opts.SkipHolders {
		readHolders(ctx, client, opts.HolderTimeout, st.Leases)
	}
	for _, gs := range snap.Groups {
		g := Group{Name: gs.Name, Partitions: gs.Partitions, Members: gs.Members, Joined: gs.Joined,
			Held: make([]Partition, 0, len(gs.PerPartition)), LastError: errString(gs.LastError)}
		for _, ps := range gs.PerPartition {
			g.Held = append(g.Held, Partition{Index: ps.Index, Token: int64(ps.Token),
				RemainingMS: ps.Remaining.Milliseconds(), Schedule: schedule(ps.Schedule)})
		}
		st.Groups = append(st.Groups, g)
	}
	return st
}

// holderReads is how many holder reads a status request makes at once.
const holderReads = 8

// readHolders fills in the holder of each lease that has none yet, reading
// them from the store at most holderReads at a time, all within timeout.
func readHolders(ctx context.Context, client *runtime.Client, timeout time.Duration, leases []Lease) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	slots := make(chan struct{}, holderReads)
	for i := range leases {
		l := &leases[i]
		if l.Holder != nil {
			continue
		}
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				l.HolderError = "simba: holder of " + l.Name + " not read: " + ctx.Err().Error()
				return
			}
			h, err := client.Holder(ctx, l.Name)
			if err != nil {
				l.HolderError = err.Error()
				return
			}
			l.Holder = &Holder{Free: h.Free(), Session: string(h.Session), Identity: h.Identity,
				Token: int64(h.Token), Self: h.Self}
		})
	}
	wg.Wait()
}

func schedule(s *runtime.ScheduleStatus) *Schedule {
	if s == nil {
		return nil
	}
	return &Schedule{Next: utc(s.Next), LastRun: utc(s.LastRun), LastError: errString(s.LastErr), Runs: s.Runs}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
