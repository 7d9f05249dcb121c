package fencing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// SequencerHeader is the HTTP header that carries a sequencer's text form.
const SequencerHeader = "Simba-Sequencer"

// ErrNoSequencer reports a request that carries no [SequencerHeader].
var ErrNoSequencer = errors.New("simba: no sequencer")

// SetSequencer sets r's [SequencerHeader] to seq's text form, replacing any
// sequencer it carried.
func SetSequencer(r *http.Request, seq Sequencer) {
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set(SequencerHeader, seq.String())
}

// SequencerFrom returns the sequencer r carries in its [SequencerHeader].
// It returns an error wrapping [ErrNoSequencer] if there is none, and one
// wrapping [ErrInvalidSequencer] if the header is there more than once or
// does not parse.
func SequencerFrom(r *http.Request) (Sequencer, error) {
	values := r.Header.Values(SequencerHeader)
	switch len(values) {
	case 0:
		return Sequencer{}, fmt.Errorf("%w: the request carries no %s header", ErrNoSequencer, SequencerHeader)
	case 1:
		return ParseSequencer(values[0])
	}
	return Sequencer{}, fmt.Errorf("simba: %w: the request carries %d %s headers; want one",
		ErrInvalidSequencer, len(values), SequencerHeader)
}

// SequencerHandler is middleware for a service downstream of lease holders:
// it runs Next for a request under the sequencer the request carries, with
// [Sequencers.Do] of Guard, so that per lease name no request under a lower
// token is handled alongside or after one under a higher token (F1, F2),
// and it refuses, with a short text body that says why:
//
//   - 409 Conflict: a stale sequencer, lower than one Guard has admitted;
//   - 400 Bad Request: a [SequencerHeader] that does not parse;
//   - 428 Precondition Required: a request that must carry a sequencer and
//     carries none;
//   - 503 Service Unavailable: a request whose context ended while it waited
//     for work under a lower token to finish.
//
// A request under a token that a higher one superseded while it was being
// handled sees its context cancelled, with a cause wrapping
// [ErrStaleToken]; Next should stop and answer promptly, since the newer
// holder's requests wait for it. What Next does must be over when it
// returns.
//
//	mux := http.NewServeMux() // the service's own handlers
//	guard := new(fencing.Sequencers)
//	srv := &http.Server{Handler: &fencing.SequencerHandler{Guard: guard, Next: mux}}
type SequencerHandler struct {
	// Guard admits sequencers. Required.
	Guard *Sequencers

	// Next handles the requests admitted. Required.
	Next http.Handler

	// Required reports whether a request must carry a sequencer. Nil means
	// the writes do, as [IsWriteRequest] tells them by method; a request
	// that need not carry one and does not goes to Next unchecked, and one
	// that carries one anyway is checked like the others.
	Required func(*http.Request) bool
}

// ServeHTTP implements http.Handler.
func (h *SequencerHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.Guard == nil || h.Next == nil {
		http.Error(w, "simba: fencing.SequencerHandler: Guard or Next is nil", http.StatusInternalServerError)
		return
	}
	seq, err := SequencerFrom(r)
	switch {
	case errors.Is(err, ErrNoSequencer):
		required := h.Required
		if required == nil {
			required = IsWriteRequest
		}
		if required(r) {
			http.Error(w, fmt.Sprintf("%v; a %s request must carry the lease holder's sequencer", err, r.Method),
				http.StatusPreconditionRequired)
			return
		}
		h.Next.ServeHTTP(w, r)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	handled := false
	err = h.Guard.Do(r.Context(), seq, func(ctx context.Context) error {
		handled = true
		h.Next.ServeHTTP(w, r.WithContext(ctx))
		return nil
	})
	switch {
	case handled:
	case errors.Is(err, ErrStaleToken):
		http.Error(w, fmt.Sprintf("%v; the request's sequencer is %q", err, seq.String()), http.StatusConflict)
	case errors.Is(err, ErrInvalidToken):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, fmt.Sprintf("simba: the request ended while it waited for older work of lease %q to finish: %v", seq.Name, err),
			http.StatusServiceUnavailable)
	}
}
