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

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/fencing"
)

func TestSequencerHeader(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	if _, err := fencing.SequencerFrom(req); !errors.Is(err, fencing.ErrNoSequencer) {
		t.Fatalf("SequencerFrom without the header = %v; want ErrNoSequencer", err)
	}
	seq := seqOf("report", 42)
	fencing.SetSequencer(req, seqOf("report", 7))
	fencing.SetSequencer(req, seq) // replaces
	if got := req.Header.Values(fencing.SequencerHeader); len(got) != 1 || got[0] != "simba-seq/1 lease report 42" {
		t.Fatalf("header = %q; want one sequencer", got)
	}
	if got, err := fencing.SequencerFrom(req); err != nil || got != seq {
		t.Fatalf("SequencerFrom = %v, %v; want %v", got, err, seq)
	}
	req.Header.Add(fencing.SequencerHeader, seqOf("report", 43).String())
	if _, err := fencing.SequencerFrom(req); !errors.Is(err, fencing.ErrInvalidSequencer) || !strings.Contains(err.Error(), "2 Simba-Sequencer headers; want one") {
		t.Fatalf("SequencerFrom with two headers = %v; want an error saying so", err)
	}
	req.Header.Set(fencing.SequencerHeader, "report#42")
	if _, err := fencing.SequencerFrom(req); !errors.Is(err, fencing.ErrInvalidSequencer) {
		t.Fatalf("SequencerFrom with a malformed header = %v; want ErrInvalidSequencer", err)
	}
}

// serve sends a request with method and, if header is not empty, that
// sequencer header to h, and returns the status and body.
func serve(h http.Handler, method, header string) (int, string) {
	req := httptest.NewRequest(method, "/", nil)
	if header != "" {
		req.Header.Set(fencing.SequencerHeader, header)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestSequencerHandler(t *testing.T) {
	var handled atomic.Int64
	guard := new(fencing.Sequencers)
	h := &fencing.SequencerHandler{Guard: guard, Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.WriteString(w, "done")
	})}
	for _, c := range []struct {
		method, header string
		code           int
		body           string // a part of it
	}{
		{http.MethodPost, seqOf("report", 57).String(), 200, "done"},
		{http.MethodPost, seqOf("report", 57).String(), 200, "done"}, // equal: same term
		{http.MethodPost, seqOf("report", 41).String(), 409,
			`simba: stale fencing token: lease "report": token 41 is lower than the highest token admitted, 57; the request's sequencer is "simba-seq/1 lease report 41"`},
		{http.MethodGet, seqOf("report", 41).String(), 409, "stale"}, // a read that carries one is checked
		{http.MethodPost, seqOf("report", 60).String(), 200, "done"},
		{http.MethodPost, seqOf("other", 1).String(), 200, "done"},
		{http.MethodPost, "simba-seq/1 lease report 0", 400, `invalid sequencer "simba-seq/1 lease report 0": token "0"`},
		{http.MethodDelete, "", 428, "simba: no sequencer: the request carries no Simba-Sequencer header; a DELETE request must carry the lease holder's sequencer"},
		{http.MethodGet, "", 200, "done"}, // a read need not carry one
	} {
		before := handled.Load()
		code, body := serve(h, c.method, c.header)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s with %q = %d %q; want %d and a body containing %q", c.method, c.header, code, body, c.code, c.body)
		}
		if ran := handled.Load() > before; ran != (c.code == 200) {
			t.Errorf("%s with %q: next handler ran: %v; want %v", c.method, c.header, ran, c.code == 200)
		}
	}
	if h := guard.Highest("report"); h != 60 {
		t.Errorf("Highest(report) = %d; want 60", h)
	}

	strict := &fencing.SequencerHandler{Guard: guard, Next: h.Next, Required: func(*http.Request) bool { return true }}
	if code, _ := serve(strict, http.MethodGet, ""); code != 428 {
		t.Errorf("a GET without a sequencer when every request requires one = %d; want 428", code)
	}
	if code, body := serve(&fencing.SequencerHandler{Next: h.Next}, http.MethodGet, ""); code != 500 || !strings.Contains(body, "Guard or Next is nil") {
		t.Errorf("a handler without a guard = %d %q; want 500 naming the field", code, body)
	}
}

// The downstream check closes the window the gate leaves open: node A's
// write that left its process while A's term was valid, and arrives after
// B took the lease over and wrote, is refused by the service with 409.
// Both terms are real, from two clients of one store.
func TestSequencerHandlerRefusesAFormerHolder(t *testing.T) {
	var last atomic.Value
	guard := new(fencing.Sequencers)
	srv, base := newServer(t, &fencing.SequencerHandler{Guard: guard, Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last.Store(string(b))
	})})
	store := memory.New()
	a, b := newClient(t, store), newClient(t, store)
	ctx := t.Context()
	termA, err := a.Lock(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	post := func(gate fencing.Gate, body string) (int, error) {
		client := &http.Client{Transport: &fencing.Transport{Gate: gate, Base: base, SendSequencer: true}}
		resp, err := client.Post(srv.URL, "text/plain", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(fencing.Gate{Term: termA}, "A1"); err != nil || code != 200 {
		t.Fatalf("A's write = %d, %v", code, err)
	}
	// A's next write leaves its process now, while its term is valid...
	late, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader("A2"))
	if err != nil {
		t.Fatal(err)
	}
	fencing.SetSequencer(late, fencing.Sequencer{Name: termA.Name(), Token: termA.Token()})

	// ... A's session expires behind its back, B takes over and writes ...
	store.Faults().ExpireSession(a.Snapshot().Session)
	termB, err := b.Lock(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if code, err := post(fencing.Gate{Term: termB}, "B1"); err != nil || code != 200 {
		t.Fatalf("B's write = %d, %v", code, err)
	}
	// ... and A's write arrives.
	resp, err := (&http.Client{Transport: base}).Do(late)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "stale fencing token") {
		t.Fatalf("A's late write = %d %q; want 409, stale", resp.StatusCode, body)
	}
	if got := last.Load(); got != "B1" {
		t.Fatalf("the service's last write is %q; want B1", got)
	}
}
