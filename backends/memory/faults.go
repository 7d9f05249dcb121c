package memory

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
)

// Faults is the test-support surface of a [Store]: it injects the failures a
// real store suffers (unreachable, slow, sessions expired behind the client's
// back, restarts that lose all state, clock-rate drift) and counts the calls
// the store receives. It is not for production use. Get it with
// [Store.Faults]; its methods are safe for concurrent use and take effect for
// calls that start afterwards.
type Faults struct {
	s *Store

	mu      sync.Mutex
	mode    Reachability
	request time.Duration
	reply   time.Duration

	calls [numMethods]atomic.Int64
}

// Reachability says how a store answers calls; see [Faults.SetReachability].
type Reachability int

const (
	// Reachable: calls reach the store (the default).
	Reachable Reachability = iota

	// Refuse: every call fails at once with an error wrapping
	// [backends.ErrUnavailable], like a refused connection. The store does
	// not see the call.
	Refuse

	// Blackhole: every call hangs until its context ends, then fails with an
	// error wrapping both [backends.ErrUnavailable] and the context's error,
	// like a network that drops packets. The store does not see the call. A
	// call whose context never ends never returns.
	Blackhole
)

// String returns the mode in words.
func (r Reachability) String() string {
	switch r {
	case Reachable:
		return "reachable"
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	}
	return "Reachability(?)"
}

// SetReachability makes the store reachable again or unreachable in one of
// two ways ([Refuse], [Blackhole]). Calls already waiting are not affected.
func (f *Faults) SetReachability(r Reachability) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = r
}

// SetLatency delays every call: request before the store handles it, reply
// after it handled it and before the caller gets the result. A call whose
// context ends during the request delay never reaches the store; during the
// reply delay, the store has already acted and only the reply is lost — both
// fail with an error wrapping [backends.ErrUnavailable] and the context's
// error. The split lets a test have the store renew a session promptly and
// deliver the reply late (D1, D4). Zero means no delay; it panics if a
// delay is negative.
func (f *Faults) SetLatency(request, reply time.Duration) {
	if request < 0 || reply < 0 {
		panic(fmt.Sprintf("memory: SetLatency(%v, %v): want delays ≥ 0", request, reply))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.request, f.reply = request, reply
}

func (f *Faults) get() (request, reply time.Duration, mode Reachability) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.request, f.reply, f.mode
}

// ExpireSession expires the session id in the store now, behind its client's
// back: its leases are released, its memberships end, watchers are woken, and
// its next call fails with [backends.ErrSessionExpired]. It reports whether
// the session was live.
func (f *Faults) ExpireSession(id backends.SessionID) bool {
	s := f.s
	s.lock()
	rec := s.sessions[id]
	if rec != nil {
		s.endSession(rec)
	}
	s.unlock()
	return rec != nil
}

// Restart simulates a restart of the store's process with all state lost:
// sessions, leases, values, groups and the token counter. The run id
// changes, every watcher is woken, and the amnesia guard starts: no
// acquisition succeeds until the store's MaxLease has passed on the store
// clock (§15), by when every old holder's local deadline has passed.
// Tokens issued afterwards are still greater than every token issued before,
// since they are at least the store clock in microseconds. The store clock,
// the faults and the call counters are kept.
func (f *Faults) Restart() {
	s := f.s
	now := s.lock()
	for name, l := range s.leases {
		s.holderChanged(name, backends.Holder{Token: l.token}) // lost with the rest
	}
	s.reset()
	s.guardUntil = now + int64(s.maxLease)
	s.pendingAll = true
	s.unlock()
}

// SetClockRate changes the rate of the store clock from now on, without a
// jump: rate store seconds pass per second of the Go clock. Expiry, the
// remaining times in renewals, and the restart guard are measured on the
// store clock, so a rate above 1 makes sessions expire sooner in the client's
// time (D3). It panics unless rate is finite and > 0.
func (f *Faults) SetClockRate(rate float64) {
	checkRate("SetClockRate", rate)
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setRate(rate)
}

// Calls returns how many calls of each kind the store received since it was
// made or since [Faults.ResetCalls], including calls that failed, were
// refused or timed out.
func (f *Faults) Calls() Calls {
	var c [numMethods]int64
	for i := range c {
		c[i] = f.calls[i].Load()
	}
	return Calls{
		OpenSession: c[mOpenSession],
		KeepAlive:   c[mKeepAlive],
		Owned:       c[mOwned],
		Acquire:     c[mAcquire],
		Release:     c[mRelease],
		PutValue:    c[mPutValue],
		Join:        c[mJoin],
		Leave:       c[mLeave],
		Members:     c[mMembers],
		Close:       c[mClose],
		StoreTime:   c[mStoreTime],
		Holder:      c[mHolder],
		Inspect:     c[mInspect],
	}
}

// ResetCalls sets every call counter to zero.
func (f *Faults) ResetCalls() {
	for i := range f.calls {
		f.calls[i].Store(0)
	}
}

// Calls counts the calls a store received, by method. Calls that fail
// validation before reaching the store (an invalid name, an oversized
// value) are not counted.
type Calls struct {
	OpenSession int64 // calls of Store.OpenSession
	KeepAlive   int64 // calls of a session's KeepAlive
	Owned       int64 // calls of a session's Owned
	Acquire     int64 // calls of a session's Acquire
	Release     int64 // calls of a session's Release
	PutValue    int64 // calls of a session's PutValue
	Join        int64 // calls of a session's Join
	Leave       int64 // calls of a session's Leave
	Members     int64 // calls of a session's Members
	Close       int64 // calls of a session's Close
	StoreTime   int64 // calls of Store.StoreTime
	Holder      int64 // calls of a session's Holder
	Inspect     int64 // calls of Store.Inspect
}

// Total returns the number of calls of every kind.
func (c Calls) Total() int64 {
	return c.OpenSession + c.KeepAlive + c.Owned + c.Acquire + c.Release + c.PutValue +
		c.Join + c.Leave + c.Members + c.Close + c.StoreTime + c.Holder + c.Inspect
}

// method names a store call, for counters and error messages.
type method int

const (
	mOpenSession method = iota
	mKeepAlive
	mOwned
	mAcquire
	mRelease
	mPutValue
	mJoin
	mLeave
	mMembers
	mClose
	mStoreTime
	mHolder
	mInspect
	numMethods
)

var methodNames = [numMethods]string{
	"open session", "keep-alive", "owned", "acquire", "release", "put value",
	"join", "leave", "members", "close", "store time", "holder", "inspect",
}

func (m method) String() string { return methodNames[m] }
