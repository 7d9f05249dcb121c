package termcheck

import (
	"sync"
	"time"
)

// Recorder records terms and fenced writes as they happen, from any
// goroutine, on one clock, for [Check]. The zero Recorder is not usable; make
// one with [NewRecorder] or [NewRecorderOn].
type Recorder struct {
	now   func() time.Duration
	epoch time.Time // NewRecorder's: the instant 0, for EndAt

	mu     sync.Mutex
	terms  []Term
	open   []bool // by TermID: not ended yet
	writes []Write
}

// TermID identifies a term a [Recorder] recorded.
type TermID int

// NewRecorder returns a Recorder on the process's monotonic clock: its
// instants count from when it was made. In a testing/synctest bubble that
// clock is the bubble's.
func NewRecorder() *Recorder {
	epoch := time.Now()
	r := NewRecorderOn(func() time.Duration { return time.Since(epoch) })
	r.epoch = epoch
	return r
}

// NewRecorderOn returns a Recorder whose instants are read from now, which
// must never go back.
func NewRecorderOn(now func() time.Duration) *Recorder { return &Recorder{now: now} }

// Now returns the recorder's current instant.
func (r *Recorder) Now() time.Duration { return r.now() }

// Begin records that node began a term of name with token now, and returns
// its id. The term is valid until [Recorder.End].
func (r *Recorder) Begin(name, node string, token int64) TermID {
	at := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terms = append(r.terms, Term{Name: name, Node: node, Token: token, Start: at})
	r.open = append(r.open, true)
	return TermID(len(r.terms) - 1)
}

// End records that the term's validity ended now, if it had not already.
func (r *Recorder) End(id TermID) {
	at := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open[id] {
		r.open[id] = false
		r.terms[id].End = at
	}
}

// EndAt records that the term's validity ended at at, if it had not
// already: for an end that the one who observes it learns later than it
// happened (runtime.Term.EndedAt, read once Done is closed). It needs a
// Recorder made by [NewRecorder], whose clock at is on; on another, it
// records the end now, as End does.
func (r *Recorder) EndAt(id TermID, at time.Time) {
	if r.epoch.IsZero() || at.IsZero() {
		r.End(id)
		return
	}
	d := at.Sub(r.epoch)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open[id] {
		r.open[id] = false
		r.terms[id].End = d
	}
}

// Elected records an elected callback for the term; from then on the term's
// callbacks are checked (Term.Listened).
func (r *Recorder) Elected(id TermID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terms[id].Listened = true
	r.terms[id].Elected++
}

// Revoked records a revoked callback for the term.
func (r *Recorder) Revoked(id TermID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terms[id].Listened = true
	r.terms[id].Revoked++
}

// Settle records that node is done: no callback is still to come for the
// terms it has begun (see Term.Settled).
func (r *Recorder) Settle(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.terms {
		if r.terms[i].Node == node {
			r.terms[i].Settled = true
		}
	}
}

// Write records a fenced write, handled by its resource now.
func (r *Recorder) Write(name, node string, token int64, accepted bool) {
	at := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, Write{Name: name, Node: node, Token: token, At: at, Accepted: accepted})
}

// Len returns how many terms were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.terms)
}

// Terms returns the terms recorded so far; a term not ended yet ends now.
func (r *Recorder) Terms() []Term {
	at := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Term, len(r.terms))
	copy(out, r.terms)
	for i := range out {
		if r.open[i] {
			out[i].End = at
		}
	}
	return out
}

// Writes returns the writes recorded so far, in the order recorded.
func (r *Recorder) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Write, len(r.writes))
	copy(out, r.writes)
	return out
}

// Check checks what was recorded so far.
func (r *Recorder) Check(o Options) Report { return Check(r.Terms(), r.Writes(), o) }
