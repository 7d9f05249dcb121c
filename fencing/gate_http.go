package fencing

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// Transport is an http.RoundTripper that puts a [Gate] in front of the
// writes an HTTP client sends: a write is refused once the term ended or
// when it would not stay valid for Gate.Min, and cancelled in flight when
// the term ends, with an error matching [ErrGateClosed] that wraps the
// term's reason. Reads pass untouched.
//
//	client := &http.Client{Transport: &fencing.Transport{
//		Gate:          fencing.Gate{Term: term, Min: time.Second},
//		Base:          base, // shared by the terms: it keeps the connections
//		SendSequencer: true,
//	}}
//
// A refused write never reaches Base: nothing was sent, and its body is
// closed. A write cancelled in flight may have reached the server, which
// may have applied it; the gate cannot know (see [Gate] for why it narrows
// the window and the server's check closes it). A write's exchange lasts
// until its response body is closed: the term's end cuts a body still
// being read, and the read fails with the same error.
//
// A Transport belongs to one term; build one per term, over a Base that
// the terms share. It is safe for concurrent use.
type Transport struct {
	// Gate is the term and the validity writes need. Required.
	Gate Gate

	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// IsWrite tells writes from reads. Nil means [IsWriteRequest]: a
	// request marked with [AsWrite] or [AsRead] is what it is marked, and
	// any other is a write unless its method is GET, HEAD, OPTIONS or TRACE.
	IsWrite func(*http.Request) bool

	// SendSequencer, when true, adds the term's sequencer to every write,
	// in the [SequencerHeader] header, for a [SequencerHandler] (or any
	// service that parses it) to check (F1).
	SendSequencer bool
}

// IsWriteRequest reports whether r is a write, as [Transport] tells them by
// default: a request whose context is marked with [AsWrite] or [AsRead] is
// what it is marked; any other is a write unless its method is GET, HEAD,
// OPTIONS or TRACE, the methods HTTP defines as safe (RFC 9110 §9.2.1).
//
// A method is only what the server promises: a GET with side effects, or a
// POST that only searches, is told apart only by marking it.
func IsWriteRequest(r *http.Request) bool {
	switch markOf(r.Context()) {
	case markedRead:
		return false
	case markedWrite:
		return true
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// RoundTrip implements http.RoundTripper. A read goes to Base as it is. A
// write is refused with a *GateError (not InFlight) if the gate is closed,
// and otherwise sent with a context that the term's end cancels; if that
// cancels it, the error is a *GateError with InFlight set. Like every
// RoundTrip, it does not modify r: it sends a copy.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	isWrite := t.IsWrite
	if isWrite == nil {
		isWrite = IsWriteRequest
	}
	if !isWrite(r) {
		return base.RoundTrip(r)
	}
	if err := t.Gate.Check(r.Method); err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // RoundTrip closes the body, even on errors
		}
		return nil, err
	}
	ctx, release := t.Gate.join(r.Context(), r.Method)
	out := r.Clone(ctx)
	if t.SendSequencer {
		SetSequencer(out, Sequencer{Name: t.Gate.Term.Name(), Token: t.Gate.Term.Token()})
	}
	resp, err := base.RoundTrip(out)
	if err != nil {
		release()
		return nil, t.Gate.inFlight(ctx, err)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		release()
		return resp, nil
	}
	resp.Body = &gatedBody{ReadCloser: resp.Body, gate: t.Gate, ctx: ctx, release: release}
	return resp, nil
}

// CloseIdleConnections closes Base's idle connections, if it has that
// method (as *http.Transport does), so that http.Client's method of that
// name reaches it.
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// gatedBody is the response body of a write: the write's context lives
// until it is closed, and a read that the term's end cut fails with a
// *GateError.
type gatedBody struct {
	io.ReadCloser
	gate    Gate
	ctx     context.Context
	release func()
	once    sync.Once
}

func (b *gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.gate.inFlight(b.ctx, err)
	}
	return n, err
}

func (b *gatedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
