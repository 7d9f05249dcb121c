package simbahttp

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/simba-go/simba/runtime"
)

// HealthOptions configure [NewHealth].
type HealthOptions struct {
	// Grace is how long the session may stay suspended or opening before
	// the check fails, counted from the first check that saw it so. Zero
	// means the client's LeaseDuration; negative means none: the check
	// fails whenever the session is not live.
	Grace time.Duration
}

// Health is a health check of one client's session; see the package
// documentation for what it reports. Its methods are safe for concurrent
// use.
type Health struct {
	client *runtime.Client
	grace  time.Duration // negative: none

	mu    sync.Mutex
	since time.Time // when a check first saw the session not live; zero while live
}

// NewHealth returns a health check of client's session.
func NewHealth(client *runtime.Client, opts HealthOptions) *Health {
	grace := opts.Grace
	if grace == 0 {
		grace = client.Config().LeaseDuration
	}
	return &Health{client: client, grace: grace}
}

// Name returns "simba", the check's name in a list of checks.
func (h *Health) Name() string { return "simba" }

// Check returns nil while the session is live, or suspended or opening for
// no longer than the grace; otherwise an error that says the state, for
// how long, and the backend's last error. It makes no call to the store;
// the request is not used.
func (h *Health) Check(_ *http.Request) error {
	return h.check(h.client.Snapshot())
}

func (h *Health) check(snap runtime.Snapshot) error {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch snap.State {
	case runtime.SessionLive:
		h.since = time.Time{}
		return nil
	case runtime.SessionClosed:
		return errors.New("simba: the client is closed")
	}
	if h.since.IsZero() {
		h.since = now
	}
	if d := now.Sub(h.since); h.grace < 0 || d > h.grace {
		msg := fmt.Sprintf("simba: session %s for %v, longer than the grace of %v", snap.State,
			d.Round(time.Millisecond), max(h.grace, 0))
		if snap.LastError != nil {
			msg += "; last backend error: " + snap.LastError.Error()
		}
		return errors.New(msg)
	}
	return nil
}

// ServeHTTP answers 200 with "ok", or 503 with the error Check returned,
// as plain text. While the store refuses grants because it is new or lost
// its state (the client's [runtime.Snapshot].Recovering), a healthy client
// answers 200 with "ok, waiting: " and why, until when (see the package
// documentation).
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	snap := h.client.Snapshot()
	if err := h.check(snap); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	if rec := snap.Recovering; rec != nil {
		fmt.Fprintln(w, "ok, waiting: "+RecoveringText(rec))
		return
	}
	fmt.Fprintln(w, "ok")
}

// RecoveringText says, in one line, why a client whose store refuses
// grants waits and until when: "no lease is granted until
// 12:00:41.123Z (in 41s): the store is new or lost its state …".
func RecoveringText(r *runtime.Recovering) string {
	if r.Until.IsZero() {
		return "no lease is granted for now (the store does not say until when): the store is new or lost its " +
			"state, and waits out the longest lease it grants, which an old holder may still believe it holds; " +
			"the backend's simba_max_lease shortens the wait; see docs/design.md §15"
	}
	guard := ""
	if r.MaxLease > 0 {
		guard = " (" + r.MaxLease.String() + ")"
	}
	return fmt.Sprintf("no lease is granted until %s (in %v): the store is new or lost its state, and waits out "+
		"the longest lease it grants%s, which an old holder may still believe it holds; the backend's "+
		"simba_max_lease shortens the wait; see docs/design.md §15", r.Until.UTC().Format("15:04:05.000Z07:00"),
		r.Remaining.Round(time.Millisecond), guard)
}
