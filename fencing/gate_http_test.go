package fencing_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/runtime"
)

// recorder is an HTTP service that counts the requests that reached it, by
// method, and remembers the last sequencer header it saw.
type recorder struct {
	writes, reads atomic.Int64
	sequencer     atomic.Value // string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	rec.sequencer.Store(r.Header.Get(fencing.SequencerHeader))
	if r.Method == http.MethodGet {
		rec.reads.Add(1)
	} else {
		rec.writes.Add(1)
	}
	_, _ = io.WriteString(w, "ok")
}

// newServer starts handler on a loopback port and returns a client whose
// transport is made by wrap around a transport of the test's own, all
// closed when the test ends.
func newServer(t *testing.T, handler http.Handler) (*httptest.Server, *http.Transport) {
	t.Helper()
	srv := httptest.NewServer(handler)
	base := &http.Transport{}
	t.Cleanup(func() {
		base.CloseIdleConnections()
		srv.Close()
	})
	return srv, base
}

// do sends a request with method to url and returns the body, or the
// error.
func do(ctx context.Context, client *http.Client, method, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader("payload"))
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// wantGateError fails t unless err is a *GateError with the given InFlight
// and Op, matching ErrGateClosed and the term's reason.
func wantGateError(t *testing.T, err error, op string, inFlight bool, reason runtime.Reason) {
	t.Helper()
	var ge *fencing.GateError
	if !errors.As(err, &ge) || !errors.Is(err, fencing.ErrGateClosed) {
		t.Fatalf("error = %v; want a *fencing.GateError matching ErrGateClosed", err)
	}
	if ge.Op != op || ge.InFlight != inFlight {
		t.Errorf("GateError{Op: %q, InFlight: %v}; want {%q, %v} (%v)", ge.Op, ge.InFlight, op, inFlight, err)
	}
	if !errors.Is(err, reason) {
		t.Errorf("error = %v; want it to wrap the term's reason, %v", err, reason)
	}
}

// A write is refused once its term ended, and never reaches the server;
// reads pass. The marks turn a POST into a read and a GET into a write.
func TestTransportRefusesWritesAfterTheTermEnded(t *testing.T) {
	rec := new(recorder)
	srv, base := newServer(t, rec)
	c, term := lockTerm(t, "gate-http-refuse")
	client := &http.Client{Transport: &fencing.Transport{Gate: fencing.Gate{Term: term, Min: 100 * time.Millisecond}, Base: base}}
	ctx := t.Context()

	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		if _, err := do(ctx, client, m, srv.URL); err != nil {
			t.Fatalf("%s while the term is valid: %v", m, err)
		}
	}
	if w, r := rec.writes.Load(), rec.reads.Load(); w != 4 || r != 1 {
		t.Fatalf("the server saw %d writes and %d reads; want 4 and 1", w, r)
	}

	unlock(t, c, term)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		_, err := do(ctx, client, m, srv.URL)
		wantGateError(t, err, m, false, runtime.ReasonStopped)
		if !errors.Is(err, runtime.ErrTermExpired) {
			t.Errorf("%s: %v; want it to wrap the term's EnsureValid error (runtime.ErrTermExpired)", m, err)
		}
	}
	if body, err := do(ctx, client, http.MethodGet, srv.URL); err != nil || body != "ok" {
		t.Fatalf("GET after the term ended = %q, %v; want reads to pass", body, err)
	}
	if body, err := do(fencing.AsRead(ctx), client, http.MethodPost, srv.URL); err != nil || body != "ok" {
		t.Fatalf("POST marked AsRead after the term ended = %q, %v; want it to pass", body, err)
	}
	_, err := do(fencing.AsWrite(ctx), client, http.MethodGet, srv.URL)
	wantGateError(t, err, http.MethodGet, false, runtime.ReasonStopped)
	if w, r := rec.writes.Load(), rec.reads.Load(); w != 5 || r != 2 {
		t.Fatalf("the server saw %d writes and %d reads; want 5 (4, and the POST marked AsRead) and 2", w, r)
	}
	want := `simba: write gate: POST refused: term gate-http-refuse#`
	if _, err := do(ctx, client, http.MethodPost, srv.URL); err == nil || !strings.Contains(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), "ended: stopped") {
		t.Errorf("error = %v; want it to contain %q and end in %q", err, want, "ended: stopped")
	}
}

// A write that is in flight when the term ends is cancelled: the server
// sees its request's context end, and the client's error says so, with
// the term's reason.
func TestTransportCancelsWritesInFlight(t *testing.T) {
	arrived := make(chan struct{})
	serverSaw := make(chan error, 1)
	srv, base := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server watches the connection
		close(arrived)
		select { // a slow write: it ends when the client goes away
		case <-r.Context().Done():
			serverSaw <- r.Context().Err()
		case <-time.After(time.Minute):
			serverSaw <- errors.New("the request was not cancelled within a minute")
		}
	}))
	e, term := electedTerm(t, "gate-http-inflight")
	client := &http.Client{Transport: &fencing.Transport{Gate: fencing.Gate{Term: term}, Base: base}}

	done := make(chan error, 1)
	go func() {
		_, err := do(context.Background(), client, http.MethodPost, srv.URL)
		done <- err
	}()
	<-arrived
	if err := e.StepDown(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	err := <-done
	wantGateError(t, err, http.MethodPost, true, runtime.ReasonSteppedDown)
	if !strings.Contains(err.Error(), "POST cancelled in flight, outcome unknown: term gate-http-inflight#") {
		t.Errorf("error = %v; want it to say the POST was cancelled in flight", err)
	}
	if err := <-serverSaw; !errors.Is(err, context.Canceled) {
		t.Fatalf("the server's request ended with %v; want it cancelled", err)
	}
}

// The term's end cuts a write's response body that is still being read.
func TestTransportCutsTheResponseOfAWriteWhenTheTermEnds(t *testing.T) {
	release := make(chan struct{})
	srv, base := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first part,")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer close(release)
	c, term := lockTerm(t, "gate-http-body")
	client := &http.Client{Transport: &fencing.Transport{Gate: fencing.Gate{Term: term}, Base: base}}

	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("first part,"))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	unlock(t, c, term)
	_, err = io.ReadAll(resp.Body)
	wantGateError(t, err, http.MethodPost, true, runtime.ReasonStopped)
}

// A write that would start with less validity left than Min is refused
// while the term is still valid; the error carries the term's EnsureValid
// error and no reason, since the term has not ended.
func TestTransportMin(t *testing.T) {
	rec := new(recorder)
	srv, base := newServer(t, rec)
	_, term := lockTerm(t, "gate-http-min")
	client := &http.Client{Transport: &fencing.Transport{Gate: fencing.Gate{Term: term, Min: time.Hour}, Base: base}}

	_, err := do(t.Context(), client, http.MethodPost, srv.URL)
	var ge *fencing.GateError
	if !errors.As(err, &ge) || ge.InFlight || ge.Reason != nil || !errors.Is(err, runtime.ErrTermExpired) {
		t.Fatalf("POST with Min longer than the lease = %v; want a refusal wrapping runtime.ErrTermExpired, with no reason", err)
	}
	if !term.Valid() {
		t.Fatal("the term ended; the test needs it valid")
	}
	if !strings.Contains(err.Error(), "ends too soon for the step") {
		t.Errorf("error = %v; want it to say the term ends too soon", err)
	}
	if rec.writes.Load() != 0 {
		t.Fatal("the refused write reached the server")
	}
}

// With SendSequencer, every write carries the term's sequencer, which the
// service parses back to the term's name and token; reads carry none. The
// caller's request is not modified.
func TestTransportSendsTheSequencer(t *testing.T) {
	rec := new(recorder)
	srv, base := newServer(t, rec)
	_, term := lockTerm(t, "gate-http-seq")
	client := &http.Client{Transport: &fencing.Transport{Gate: fencing.Gate{Term: term}, Base: base, SendSequencer: true}}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	seq, err := fencing.ParseSequencer(rec.sequencer.Load().(string))
	if err != nil {
		t.Fatalf("the write's sequencer: %v", err)
	}
	if seq.Name != term.Name() || seq.Token != term.Token() {
		t.Fatalf("the write carried %v; want the term's name %q and token %d", seq, term.Name(), term.Token())
	}
	if got := req.Header.Get(fencing.SequencerHeader); got != "" {
		t.Errorf("the caller's request was modified: it has a sequencer header %q", got)
	}
	if _, err := do(t.Context(), client, http.MethodGet, srv.URL); err != nil {
		t.Fatal(err)
	}
	if got := rec.sequencer.Load().(string); got != "" {
		t.Errorf("a read carried the sequencer %q; want none", got)
	}
}

// A custom predicate decides what is a write.
func TestTransportIsWrite(t *testing.T) {
	rec := new(recorder)
	srv, base := newServer(t, rec)
	c, term := lockTerm(t, "gate-http-pred")
	unlock(t, c, term)
	client := &http.Client{Transport: &fencing.Transport{
		Gate: fencing.Gate{Term: term},
		Base: base,
		IsWrite: func(r *http.Request) bool {
			return !strings.HasSuffix(r.URL.Path, "/search")
		},
	}}
	if _, err := do(t.Context(), client, http.MethodPost, srv.URL+"/search"); err != nil {
		t.Fatalf("a POST the predicate calls a read: %v", err)
	}
	_, err := do(t.Context(), client, http.MethodGet, srv.URL+"/items")
	wantGateError(t, err, http.MethodGet, false, runtime.ReasonStopped)
}

// closeRecorder is a request body that records that it was closed.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error { b.closed.Store(true); return nil }

// A refused write's body is closed, as RoundTrip promises; a gate that
// cannot work says which field is wrong, and is not taken for a closed
// gate.
func TestTransportBadInput(t *testing.T) {
	c, term := lockTerm(t, "gate-http-bad")
	unlock(t, c, term)
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:1/", body)
	if err != nil {
		t.Fatal(err)
	}
	tr := &fencing.Transport{Gate: fencing.Gate{Term: term}}
	if _, err := tr.RoundTrip(req); !errors.Is(err, fencing.ErrGateClosed) {
		t.Fatalf("RoundTrip = %v; want ErrGateClosed", err)
	}
	if !body.closed.Load() {
		t.Error("the refused write's body was not closed")
	}

	for _, c := range []struct {
		gate fencing.Gate
		want string
	}{
		{fencing.Gate{}, "Term is nil"},
		{fencing.Gate{Term: term, Min: -time.Second}, "Min is -1s; want 0 or more"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:1/", nil)
		_, err := (&fencing.Transport{Gate: c.gate}).RoundTrip(req)
		if err == nil || errors.Is(err, fencing.ErrGateClosed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RoundTrip with %+v = %v; want an error containing %q, not ErrGateClosed", c.gate, err, c.want)
		}
	}
}
