package fencingtest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

func TestCell(t *testing.T) {
	Run(t, func(testing.TB) fencing.Resource { return new(fencing.Cell) })
}

// recorder is a testing.TB that records failures instead of failing the
// test that runs the kit. Fatal stops the goroutine, as testing.T's does.
// Methods it does not define panic (the embedded TB is nil).
type recorder struct {
	testing.TB
	ctx      context.Context
	mu       sync.Mutex
	failures []string
	skipped  string
	cleanups []func()
}

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Cleanup(f func())         { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Name() string             { return "recorder" }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatal(args ...any) {
	r.Errorf("%s", fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// runCheck runs one of the kit's checks on a recorder, on its own goroutine
// as the testing package would, and returns the failures it reported.
func runCheck(t *testing.T, check func(testing.TB, func(testing.TB) fencing.Resource), newResource func(testing.TB) fencing.Resource) []string {
	rec := &recorder{ctx: t.Context()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for _, f := range slices.Backward(rec.cleanups) {
				f()
			}
		}()
		check(rec, newResource)
	}()
	<-done
	if rec.skipped != "" {
		t.Skip(rec.skipped) // a server the resource needs is missing
	}
	return rec.failures
}

// readThenWrite is the broken resource of F2: it reads the highest token,
// checks it, and only then writes, yielding in between as a real store's
// round trip would. It is free of data races (every access holds mu), so a
// failure of the kit under -race is the kit's own finding.
type readThenWrite struct {
	mu    sync.Mutex
	value []byte
	token backends.Token
}

func (r *readThenWrite) Write(_ context.Context, token backends.Token, v []byte) error {
	if err := fencing.CheckToken(token); err != nil {
		return err
	}
	r.mu.Lock()
	highest := r.token
	r.mu.Unlock()
	if token < highest {
		return fencing.StaleError(token, highest)
	}
	runtime.Gosched() // the window between the read and the write
	r.mu.Lock()
	defer r.mu.Unlock()
	r.value, r.token = slices.Clone(v), token
	return nil
}

func (r *readThenWrite) Read(context.Context) ([]byte, backends.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.value), r.token, nil
}

// TestKitCatchesReadThenWrite runs the concurrent checks K times on the
// read-then-write resource: AtomicCheckAndWrite must catch it every time
// (the kit as a whole then fails it every time); ConcurrentWriters, whose
// target is interleaving rather than this race, is only reported.
func TestKitCatchesReadThenWrite(t *testing.T) {
	const k = 20
	newBroken := func(testing.TB) fencing.Resource { return new(readThenWrite) }
	atomicCaught, concurrentCaught := 0, 0
	for range k {
		failures := runCheck(t, checkAtomic, newBroken)
		if len(failures) > 0 {
			atomicCaught++
			if atomicCaught == 1 {
				t.Logf("first report: %s", failures[0])
			}
			if !strings.Contains(failures[0], "not one atomic step (F2)") {
				t.Errorf("the failure does not name the contract: %s", failures[0])
			}
		}
		if len(runCheck(t, checkConcurrentWriters, newBroken)) > 0 {
			concurrentCaught++
		}
	}
	t.Logf("caught %d/%d by AtomicCheckAndWrite (%d/%d by ConcurrentWriters alone)", atomicCaught, k, concurrentCaught, k)
	if atomicCaught != k {
		t.Errorf("AtomicCheckAndWrite caught the read-then-write resource %d/%d times; want %d/%d", atomicCaught, k, k, k)
	}
}

// mutant is a resource that breaks one rule at a time, for the sequential
// checks. It is correct in every way its flags do not change.
type mutant struct {
	acceptLower   bool // no token check at all
	rejectEqual   bool // only strictly greater tokens
	forgetToken   bool // stores the value but never records the token
	acceptInvalid bool // accepts tokens below 1
	wrongError    bool // rejects lower tokens with an error that is not ErrStaleToken
	// keep, if set, is how the resource stores tokens, such as in a
	// float64: it compares and records keep(token) rather than token.
	keep func(backends.Token) backends.Token
	// readExact makes Read return the token last accepted, as written,
	// rather than as kept: only the comparisons use keep.
	readExact bool
	// refuseInexact refuses, with ErrInvalidToken, a token that keep
	// changes: what a resource that cannot store every token must do.
	refuseInexact bool
	exact         backends.Token // the token last accepted, as written

	mu    sync.Mutex
	value []byte
	token backends.Token
}

func (m *mutant) Write(_ context.Context, token backends.Token, v []byte) error {
	if !m.acceptInvalid {
		if err := fencing.CheckToken(token); err != nil {
			return err
		}
	}
	kept := token
	if m.keep != nil {
		kept = m.keep(token)
	}
	if m.refuseInexact && kept != token {
		return fmt.Errorf("%w: %d cannot be kept exactly", fencing.ErrInvalidToken, token)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stale := kept < m.token || (m.rejectEqual && kept == m.token)
	if stale && !m.acceptLower {
		if m.wrongError {
			return fmt.Errorf("token %d refused", token)
		}
		return fencing.StaleError(token, m.token)
	}
	m.value = slices.Clone(v)
	if !m.forgetToken {
		m.token, m.exact = kept, token
	}
	return nil
}

func (m *mutant) Read(context.Context) ([]byte, backends.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readExact {
		return slices.Clone(m.value), m.exact, nil
	}
	return slices.Clone(m.value), m.token, nil
}

// Ways to keep a token in fewer than 64 bits, as a resource may: a float64
// (a JSON number, a Lua number, a double column), a float32, an int32 column.
func inFloat64(t backends.Token) backends.Token { return backends.Token(float64(t)) }
func inFloat32(t backends.Token) backends.Token { return backends.Token(float32(t)) }
func inInt32(t backends.Token) backends.Token   { return backends.Token(int32(t)) }

// TestKitFailsNarrowTokens runs the whole kit on resources that keep tokens
// in a float64, a float32 or an int32: with tokens of real size, each fails
// it, at least in the checks named.
func TestKitFailsNarrowTokens(t *testing.T) {
	for _, c := range []struct {
		name string
		keep func(backends.Token) backends.Token
		want []string // checks that must fail
	}{
		{"float64", inFloat64, []string{"LargeTokens"}},
		{"float32", inFloat32, []string{"HigherAccepted", "EqualAccepted", "LowerRejected", "ConcurrentWriters", "AtomicCheckAndWrite"}},
		{"int32", inInt32, []string{"HigherAccepted", "LowerRejected", "LargeTokens"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var failed []string
			for _, check := range checks {
				if failures := runCheck(t, check.fn, func(testing.TB) fencing.Resource { return &mutant{keep: c.keep} }); len(failures) > 0 {
					failed = append(failed, check.name)
					t.Logf("%s: %s", check.name, failures[0])
				}
			}
			for _, name := range c.want {
				if !slices.Contains(failed, name) {
					t.Errorf("%s passed a resource that keeps tokens in a %s; failed: %v", name, c.name, failed)
				}
			}
		})
	}
}

func TestKitCatchesBrokenResources(t *testing.T) {
	cases := []struct {
		name  string
		check func(testing.TB, func(testing.TB) fencing.Resource)
		new   func() fencing.Resource
		want  string // in the first failure
	}{
		{"lower token accepted", checkLowerRejected, func() fencing.Resource { return &mutant{acceptLower: true} }, "want an error wrapping fencing.ErrStaleToken"},
		{"lower token accepted, concurrently", checkConcurrentWriters, func() fencing.Resource { return &mutant{acceptLower: true} }, "violations"},
		{"equal token rejected", checkEqualAccepted, func() fencing.Resource { return &mutant{rejectEqual: true} }, "a retry with the same token and value"},
		{"token not recorded", checkHigherAccepted, func() fencing.Resource { return &mutant{forgetToken: true} }, "want ("},
		{"token 0 accepted", checkInvalidToken, func() fencing.Resource { return &mutant{acceptInvalid: true} }, "Write(token 0) on an empty resource = nil"},
		{"stale without ErrStaleToken", checkLowerRejected, func() fencing.Resource { return &mutant{wrongError: true} }, "refused; want an error wrapping fencing.ErrStaleToken"},
		{"tokens kept in a float64", checkLargeTokens, func() fencing.Resource { return &mutant{keep: inFloat64} }, "want (\"fencingtest token=9007199254740993 2^53+1\", token 9007199254740993)"},
		{"tokens kept in an int32", checkHigherAccepted, func() fencing.Resource { return &mutant{keep: inInt32} }, "Write(token 1796029244739692) = simba: stale fencing token"},
		{"tokens kept in an int32, lower by 2^32", checkLowerRejected, func() fencing.Resource { return &mutant{keep: inInt32, readExact: true} }, "want an error wrapping fencing.ErrStaleToken"},
		{"tokens kept in a float32", checkConcurrentWriters, func() fencing.Resource { return &mutant{keep: inFloat32} }, "violations"},
		{"nil resource", checkEmpty, func() fencing.Resource { return nil }, "newResource returned a nil Resource"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			failures := runCheck(t, c.check, func(testing.TB) fencing.Resource { return c.new() })
			if len(failures) == 0 {
				t.Fatal("the kit passed a broken resource")
			}
			if !strings.Contains(failures[0], c.want) {
				t.Errorf("first failure %q lacks %q", failures[0], c.want)
			}
		})
	}
}

// TestKitPassesCorrectResources runs every check on a correct resource
// through the recorder too, so that the recorder itself is known to pass
// what deserves passing.
func TestKitPassesCorrectResources(t *testing.T) {
	for _, c := range checks {
		if failures := runCheck(t, c.fn, func(testing.TB) fencing.Resource { return new(fencing.Cell) }); len(failures) > 0 {
			t.Errorf("%s failed on fencing.Cell: %q", c.name, failures)
		}
		if failures := runCheck(t, c.fn, func(testing.TB) fencing.Resource { return new(mutant) }); len(failures) > 0 {
			t.Errorf("%s failed on a correct mutant: %q", c.name, failures)
		}
		// A resource that keeps tokens in a float64 but refuses those it
		// cannot keep exactly, as the Redis recipe does, is correct.
		if failures := runCheck(t, c.fn, func(testing.TB) fencing.Resource { return &mutant{keep: inFloat64, refuseInexact: true} }); len(failures) > 0 {
			t.Errorf("%s failed on a float64 resource that refuses tokens from 2^53: %q", c.name, failures)
		}
	}
}
