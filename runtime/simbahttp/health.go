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
	snap := h.client.Snapshot()
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
// as plain text.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := h.Check(r); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}
