package runtime

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// Batches: when the session implements backends.BatchSession, a goroutine
// that is to make an acquire (or a release) takes with it the acquires (the
// releases) of the same session queued right behind it, up to maxBatch, and
// makes them all in one backend call: one round trip and, on PostgreSQL,
// one commit for the lot. Each result is fed to the core as the reply to
// its own request, in the order the requests were sent, as if each had
// been made by a call of its own one after the other; a batch that fails as
// a whole fails each of its requests with its error. The core does not
// know; only queued calls are batched — those that wait for the lease call
// in flight (maxBatchCalls), a storm's — so that a lone acquire goes out at
// once, as before.
//
// A run of the queue is taken only as far as the first call of another
// kind or session, so that the calls of one name keep their order (an
// acquire queued behind a release of the same name is made after it). The
// batch's deadline (D2) is its first request's timeout from when the
// goroutine took it, as for a call of its own: every request of a batch
// shares one timeout, the session's renewal period.

// maxBatch bounds the requests of one batch, so that no call holds up the
// session's keep-alive for long: a batch of 256 acquires took about 6 ms
// on Redis and 13 ms on PostgreSQL (whose statement holds the session's
// row until it commits; about 2 ms in the server since its functions
// revision 5 grants free names in bulk), round trip and client included,
// on the test machine. It is also the engine's bound on acquires in flight (its
// acquireSlots), so that a storm's batches are full.
const maxBatch = 256

// maxBatchCalls bounds the lease calls in flight, instead of maxLeaseCalls,
// for a session that batches: one batch at a time, each as large as the
// queue allows. More in flight only split the queue into smaller batches
// that waited for each other in the store (Redis runs one script at a time;
// PostgreSQL's acquires of one session take its row in turn, until their
// commit): a client took a million leases in 22.6 s on Redis and 51.5 s on
// PostgreSQL with one, in 23.6 s and 61.8 s with two, and in 26–27 s and
// 68 s with four (BenchmarkHeldLeases, batches of 256, 100 and 45–50
// leases, with PostgreSQL's functions revision 4; with revision 5 and one
// batch in flight, 14.8–18.7 s). The session's keep-alive never waits
// behind more than one.
const maxBatchCalls = 1

// leaseCallLimit is how many lease calls may be in flight when p is sent:
// maxBatchCalls if its session batches, else maxLeaseCalls.
func leaseCallLimit(p pendingCall) int {
	if _, ok := batchable(p); ok {
		return maxBatchCalls
	}
	return maxLeaseCalls
}

// batchable reports whether p can be made in a batch, and returns the
// session's batch interface.
func batchable(p pendingCall) (backends.BatchSession, bool) {
	if p.req.Kind != engine.ReqAcquire && p.req.Kind != engine.ReqRelease {
		return nil, false
	}
	bs, ok := p.s.(backends.BatchSession)
	return bs, ok
}

// batches makes p in a batch with the calls queued behind it, if its
// session batches and some are, and then the next queued calls likewise,
// for as long as each can be; it returns the first call left to make alone
// (skip: not at all, the client having closed), or done if it made them all
// and the goroutine gave its place up.
func (d *driver) batches(p pendingCall) (next pendingCall, skip, done bool) {
	var buf []pendingCall
	for {
		bs, ok := batchable(p)
		if !ok {
			return p, false, false
		}
		d.apply(func(now mono) { buf = d.takeBatch(now, p, buf[:0]) })
		if len(buf) == 1 {
			return p, false, false
		}
		results := d.invokeBatch(bs, buf)
		more := false
		d.apply(func(now mono) {
			for i := range buf {
				d.replied(now, buf[i].req, results[i], nil)
			}
			next, more = d.nextQueued(now)
			skip = d.shutdown
		})
		for range buf {
			d.wg.Done()
		}
		clear(buf)
		if !more {
			return pendingCall{}, false, true
		}
		if skip {
			return next, true, false
		}
		p = next
		p.deadline = time.Now().Add(p.req.Timeout)
	}
}

// takeBatch appends p to buf, and the queued calls of p's kind and session
// right behind it that the core still wants, up to maxBatch in all; those
// it no longer wants are answered on the way without being made, as
// nextQueued does. The caller holds d.mu.
func (d *driver) takeBatch(now mono, p pendingCall, buf []pendingCall) []pendingCall {
	buf = append(buf, p)
	if d.shutdown {
		return buf
	}
	for answered := 0; len(buf) < maxBatch && len(d.queued) > 0; {
		q := d.queued[0]
		if q.req.Kind != p.req.Kind || q.s != p.s {
			break
		}
		d.queued[0] = pendingCall{}
		d.queued = d.queued[1:]
		if len(d.queued) == 0 {
			d.queued = nil // let the array go
		}
		if answered < maxUnwantedPerStep && !d.m.Wanted(q.req.ID) {
			answered++
			d.replied(now, q.req, engine.Result{Err: errNotMade}, nil)
			d.wg.Done()
			continue
		}
		buf = append(buf, q)
	}
	return buf
}

// invokeBatch makes the calls of batch, all acquires or all releases of one
// session, in one backend call bounded by the first one's deadline (D2),
// and returns one result per call. A backend that panics fails each call
// with a *PanicError, as invoke does.
func (d *driver) invokeBatch(bs backends.BatchSession, batch []pendingCall) (results []engine.Result) {
	ctx := &callCtx{deadline: batch[0].deadline}
	defer ctx.end()
	results = make([]engine.Result, len(batch))
	fail := func(err error) {
		for i := range results {
			results[i] = engine.Result{Err: err}
		}
	}
	kind := batch[0].req.Kind
	defer func() {
		if v := recover(); v != nil {
			fail(fmt.Errorf("simba: %v: the backend (%T) panicked: %w", kind, d.backend,
				&PanicError{Value: v, Stack: debug.Stack()}))
		}
	}()
	var n int
	var err error
	if kind == engine.ReqAcquire {
		names := make([]string, len(batch))
		for i, p := range batch {
			names[i] = p.req.Name
		}
		var rs []backends.AcquireResult
		rs, err = bs.AcquireBatch(ctx, names)
		for i := range min(len(rs), len(results)) {
			results[i].Grant, results[i].Err = rs[i].Grant, rs[i].Err
		}
		n = len(rs)
	} else {
		leases := make([]backends.Held, len(batch))
		for i, p := range batch {
			leases[i] = backends.Held{Name: p.req.Name, Token: p.req.Token}
		}
		var rs []backends.ReleaseResult
		rs, err = bs.ReleaseBatch(ctx, leases)
		for i := range min(len(rs), len(results)) {
			results[i].Digest, results[i].Err = rs[i].Digest, rs[i].Err
		}
		n = len(rs)
	}
	switch {
	case err != nil:
		fail(err)
	case n != len(batch):
		fail(fmt.Errorf("simba: %v of %d leases: the backend (%T) returned %d results", kind, len(batch), d.backend, n))
	}
	return results
}
