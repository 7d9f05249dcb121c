// Package fencingtest is the conformance kit for fenced resources (F4):
// run it on your own [fencing.Resource] to check that it refuses stale
// holders, in the way testing/fstest checks a file system.
//
// Rule names such as F1 or §12 refer to docs/design.md in the repository.
//
//	func TestInvoiceRowIsFenced(t *testing.T) {
//		fencingtest.Run(t, func(t testing.TB) fencing.Resource {
//			return newInvoiceRow(t) // a new, empty resource for each check
//		})
//	}
//
// Run checks, each in a subtest named after the contract:
//
//   - Empty: a new resource reads as nothing written, token 0.
//   - HigherAccepted: a higher token is accepted and recorded with its value.
//   - EqualAccepted: the same token again is accepted, with the same value (a
//     retry) or a new one (another write of the same term) (F1).
//   - LowerRejected: a lower token is rejected with an error wrapping
//     [fencing.ErrStaleToken], and nothing changes (F1), whether it is lower
//     by 1 or by 2^32.
//   - InvalidToken: tokens 0 and -1 are rejected, and nothing changes.
//   - LargeTokens: 2^53-1, the largest token a backend issues, is accepted
//     and read back exactly; each larger token (2^53+1, 2^62+1, the largest
//     int64) is either stored exactly, and then the token below it is
//     rejected as stale, or refused with an error wrapping
//     [fencing.ErrInvalidToken] and nothing changes.
//   - ConcurrentWriters: writers with interleaved tokens and concurrent
//     readers; no reader ever sees a value written with a token lower than
//     one accepted before its read began, and no write is accepted with a
//     token lower than one accepted before it began (F1).
//   - AtomicCheckAndWrite: rounds of writers released at once with adjacent
//     tokens; after each round the resource holds the value of the highest
//     token accepted in it. A resource that reads the highest token and then
//     writes fails this (F2).
//
// The tokens the kit writes are as large as real ones. Backends issue
// microseconds of Unix time (about 2^50.7 late in 2026) or counters, and keep
// them below 2^53, the range that Redis's scripts, which compute in doubles,
// hold exactly. So the checks write tokens just below 2^53, some 2^32 apart
// and some 1 apart: a resource that keeps tokens in 32 bits collapses the
// first pairs, one that keeps them in a float32 the second, and one that
// keeps them in a float64 collapses 2^53 and 2^53+1, which LargeTokens
// writes. Every such resource fails the kit.
//
// The kit writes values of at most 64 bytes.
package fencingtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

// Run checks the contracts listed in the package documentation, one subtest
// each. newResource is called once per subtest and must return a new,
// empty resource (nothing written); it may use t for set-up, clean-up
// (t.Cleanup) and to fail or skip the test.
func Run(t *testing.T, newResource func(t testing.TB) fencing.Resource) {
	t.Helper()
	if newResource == nil {
		t.Fatal("fencingtest.Run: newResource is nil")
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newResource) })
	}
}

// checks are the contracts Run checks, in order. Each takes a testing.TB so
// that the kit's own tests can run it with a TB that records failures.
var checks = []struct {
	name string
	fn   func(t testing.TB, newResource func(testing.TB) fencing.Resource)
}{
	{"Empty", checkEmpty},
	{"HigherAccepted", checkHigherAccepted},
	{"EqualAccepted", checkEqualAccepted},
	{"LowerRejected", checkLowerRejected},
	{"InvalidToken", checkInvalidToken},
	{"LargeTokens", checkLargeTokens},
	{"ConcurrentWriters", checkConcurrentWriters},
	{"AtomicCheckAndWrite", checkAtomic},
}

// opTimeout bounds every call the kit makes to a resource.
const opTimeout = 30 * time.Second

// The tokens of the checks (see the package documentation).
const (
	// today is a token as backends issue them late in 2026: microseconds of
	// Unix time, about 2^50.7.
	today backends.Token = 1_796_029_244_739_692
	// top is the largest token a backend issues: 2^53-1, the largest of
	// the integers that a float64 holds exactly, all of them.
	top backends.Token = 1<<53 - 1
	// base is where the tokens of most checks start: near top, but far
	// enough below it for tokens 2^32 above base and more to stay below it.
	base = top - 1<<33
)

// open calls newResource and fails t if it returns nil.
func open(t testing.TB, newResource func(testing.TB) fencing.Resource) fencing.Resource {
	t.Helper()
	r := newResource(t)
	if r == nil {
		t.Fatal("fencingtest: newResource returned a nil Resource")
	}
	return r
}

// value is the value the kit writes with token: it names the token, so that
// a read shows which write it comes from.
func value(token backends.Token, note string) []byte {
	return fmt.Appendf(nil, "fencingtest token=%d %s", token, note)
}

// tokenOf returns the token a value written by the kit names.
func tokenOf(v []byte) (backends.Token, bool) {
	rest, ok := bytes.CutPrefix(v, []byte("fencingtest token="))
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(string(rest), " ")
	n, err := strconv.ParseInt(num, 10, 64)
	return backends.Token(n), err == nil
}

func write(t testing.TB, r fencing.Resource, token backends.Token, v []byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	return r.Write(ctx, token, v)
}

func read(t testing.TB, r fencing.Resource) ([]byte, backends.Token) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	v, tok, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return v, tok
}

// mustAccept writes and fails t unless the write is accepted.
func mustAccept(t testing.TB, r fencing.Resource, token backends.Token, v []byte, why string) {
	t.Helper()
	if err := write(t, r, token, v); err != nil {
		t.Fatalf("Write(token %d) = %v; want it accepted: %s", token, err, why)
	}
}

// wantState fails t unless the resource holds v with token.
func wantState(t testing.TB, r fencing.Resource, token backends.Token, v []byte) {
	t.Helper()
	gotV, gotTok := read(t, r)
	if gotTok != token || !bytes.Equal(gotV, v) {
		t.Fatalf("Read = (%q, token %d); want (%q, token %d)", gotV, gotTok, v, token)
	}
}

func checkEmpty(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	r := open(t, newResource)
	v, tok := read(t, r)
	if tok != 0 || len(v) != 0 {
		t.Fatalf("a new resource reads (%q, token %d); want nothing, token 0", v, tok)
	}
}

func checkHigherAccepted(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	r := open(t, newResource)
	mustAccept(t, r, today, value(today, "first"), "the first write of a resource")
	wantState(t, r, today, value(today, "first"))
	prev := today
	for _, tok := range []backends.Token{base + 9, base + 10, base + 10 + 1<<32, top} {
		v := value(tok, "newer term")
		mustAccept(t, r, tok, v, fmt.Sprintf("token %d is higher than %d", tok, prev))
		wantState(t, r, tok, v)
		prev = tok
	}
}

func checkEqualAccepted(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	r := open(t, newResource)
	tok := base + 7
	v := value(tok, "step 1")
	mustAccept(t, r, tok, v, "the first write")
	mustAccept(t, r, tok, v, "a retry with the same token and value (F1)")
	wantState(t, r, tok, v)
	v2 := value(tok, "step 2")
	mustAccept(t, r, tok, v2, "a second write of the same term carries the same token (F1)")
	wantState(t, r, tok, v2)
}

func checkLowerRejected(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	r := open(t, newResource)
	hi := base + 1<<32 + 7
	v := value(hi, "current holder")
	mustAccept(t, r, hi, v, "the first write")
	// Lower by 1, by exactly 2^32 (the same low 32 bits), a token of
	// today's size, and the lowest token there is.
	for _, tok := range []backends.Token{hi - 1, hi - 1<<32, today, 1} {
		err := write(t, r, tok, value(tok, "stale holder"))
		if !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("Write(token %d) after token %d = %v; want an error wrapping fencing.ErrStaleToken", tok, hi, err)
		}
		wantState(t, r, hi, v)
	}
}

// checkLargeTokens writes top, then tokens beyond it, each higher one
// first: a resource must store such a token exactly, and then reject the
// token just below it, or refuse it as invalid and change nothing. A
// resource that keeps tokens in a float64 rounds 2^53+1 to 2^53, reads
// back the wrong token, and takes 2^53 for a retry of the same term.
func checkLargeTokens(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	r := open(t, newResource)
	v := value(top, "2^53-1")
	mustAccept(t, r, top, v, "2^53-1 is a token that backends issue")
	wantState(t, r, top, v)
	cur := top
	for _, pair := range []struct {
		hi, lo backends.Token
		name   string
	}{
		{1<<53 + 1, 1 << 53, "2^53+1"},
		{1<<62 + 1, 1 << 62, "2^62+1"},
		{math.MaxInt64, math.MaxInt64 - 1, "2^63-1"},
	} {
		hv := value(pair.hi, pair.name)
		err := write(t, r, pair.hi, hv)
		switch {
		case errors.Is(err, fencing.ErrInvalidToken):
			wantState(t, r, cur, v) // refused: nothing changed
			continue
		case err != nil:
			t.Fatalf("Write(token %d = %s) after token %d = %v; want it accepted, or refused with an error wrapping fencing.ErrInvalidToken if the resource cannot store it exactly",
				pair.hi, pair.name, cur, err)
		}
		wantState(t, r, pair.hi, hv)
		if err := write(t, r, pair.lo, value(pair.lo, "stale holder")); !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("Write(token %d) after token %d = %v; want an error wrapping fencing.ErrStaleToken (they differ in the lowest bit)", pair.lo, pair.hi, err)
		}
		wantState(t, r, pair.hi, hv)
		cur, v = pair.hi, hv
	}
}

func checkInvalidToken(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	r := open(t, newResource)
	for _, tok := range []backends.Token{0, -1} {
		if err := write(t, r, tok, value(tok, "no term")); err == nil {
			t.Fatalf("Write(token %d) on an empty resource = nil; want an error: no term has token %d", tok, tok)
		}
	}
	checkEmptyNow(t, r)
	mustAccept(t, r, base+3, value(base+3, "a term"), "the first valid write")
	for _, tok := range []backends.Token{0, -1} {
		if err := write(t, r, tok, value(tok, "no term")); err == nil {
			t.Fatalf("Write(token %d) = nil; want an error", tok)
		}
	}
	wantState(t, r, base+3, value(base+3, "a term"))
}

func checkEmptyNow(t testing.TB, r fencing.Resource) {
	t.Helper()
	if v, tok := read(t, r); tok != 0 || len(v) != 0 {
		t.Fatalf("after rejected writes the resource reads (%q, token %d); want nothing, token 0", v, tok)
	}
}

// violations collects what concurrent goroutines saw, for the test goroutine
// to report (only it may call t.Fatal).
type violations struct {
	mu   sync.Mutex
	list []string
	errs []error
}

func (vs *violations) add(format string, args ...any) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.list = append(vs.list, fmt.Sprintf(format, args...))
}

func (vs *violations) fail(err error) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.errs = append(vs.errs, err)
}

// report fails t with the first few violations and errors.
func (vs *violations) report(t testing.TB, contract string) {
	t.Helper()
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if len(vs.errs) > 0 {
		t.Fatalf("unexpected errors (%d), first: %v", len(vs.errs), vs.errs[0])
	}
	if len(vs.list) == 0 {
		return
	}
	const show = 5
	shown := vs.list[:min(show, len(vs.list))]
	t.Fatalf("%s: %d violations, first %d:\n\t%s", contract, len(vs.list), len(shown), strings.Join(shown, "\n\t"))
}

// raiseTo sets *a to at least v.
func raiseTo(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

func checkConcurrentWriters(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	const (
		writers = 4
		rounds  = 25 // tokens per writer
		readers = 2
	)
	r := open(t, newResource)
	var (
		accepted atomic.Int64 // highest token whose Write has returned nil
		vs       violations
		wg       sync.WaitGroup
		stop     = make(chan struct{})
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*opTimeout)
	defer cancel()

	// Writer w writes tokens base+w+1, base+w+1+writers, …: the tokens of
	// the writers interleave, and each writer keeps going after its writes
	// turn stale.
	var writersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() {
			for i := range rounds {
				tok := base + backends.Token(w+1+i*writers)
				floor := accepted.Load()
				err := r.Write(ctx, tok, value(tok, fmt.Sprintf("writer %d", w)))
				switch {
				case err == nil:
					if int64(tok) < floor {
						vs.add("Write(token %d) accepted after token %d was accepted", tok, floor)
					}
					raiseTo(&accepted, int64(tok))
				case errors.Is(err, fencing.ErrStaleToken):
				default:
					vs.fail(fmt.Errorf("Write(token %d): %w", tok, err))
					return
				}
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := accepted.Load()
				v, tok, err := r.Read(ctx)
				if err != nil {
					vs.fail(fmt.Errorf("Read: %w", err))
					return
				}
				checkRead(&vs, v, tok, floor)
				runtime.Gosched() // leave the writers room when there is one P
			}
		})
	}
	writersWG.Wait()
	close(stop)
	wg.Wait()

	v, tok := read(t, r)
	checkRead(&vs, v, tok, accepted.Load())
	if want := accepted.Load(); int64(tok) != want {
		vs.add("after all writes the resource holds token %d; the highest accepted was %d", tok, want)
	}
	vs.report(t, "a value written with a lower token outlived a higher accepted token")
}

// checkRead records a violation unless a read of (v, tok) is consistent and
// not older than floor, the highest token accepted before the read began.
func checkRead(vs *violations, v []byte, tok backends.Token, floor int64) {
	vtok, ok := tokenOf(v)
	switch {
	case tok == 0 && len(v) == 0:
		if floor > 0 {
			vs.add("Read returned nothing after token %d was accepted", floor)
		}
	case !ok:
		vs.add("Read returned a value the kit did not write: %q (token %d)", v, tok)
	case vtok != tok:
		vs.add("Read returned token %d with the value written with token %d", tok, vtok)
	case int64(vtok) < floor:
		vs.add("Read returned the value of token %d after token %d was accepted", vtok, floor)
	}
}

func checkAtomic(t testing.TB, newResource func(testing.TB) fencing.Resource) {
	const (
		rounds  = 20
		writers = 4
	)
	r := open(t, newResource)
	var vs violations
	ctx, cancel := context.WithTimeout(t.Context(), 2*opTimeout)
	defer cancel()
	from := base
	for round := range rounds {
		// Tokens from+1 … from+writers, released together: whichever order
		// they land in, the resource must end up holding the highest one
		// accepted. Writer w gets token from+writers-w, so the highest
		// token's goroutine is started first.
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			best  atomic.Int64
		)
		for w := range writers {
			tok := from + backends.Token(writers-w)
			wg.Go(func() {
				<-start
				err := r.Write(ctx, tok, value(tok, fmt.Sprintf("round %d", round)))
				switch {
				case err == nil:
					raiseTo(&best, int64(tok))
				case errors.Is(err, fencing.ErrStaleToken):
				default:
					vs.fail(fmt.Errorf("round %d: Write(token %d): %w", round, tok, err))
				}
			})
		}
		close(start)
		wg.Wait()
		v, tok := read(t, r)
		b := best.Load()
		if b == 0 {
			vs.add("round %d: no write of tokens %d…%d was accepted", round, from+1, from+writers)
		} else if vtok, _ := tokenOf(v); int64(tok) != b || vtok != tok {
			vs.add("round %d: the resource holds (value of token %d, token %d); the highest token accepted was %d",
				round, vtok, tok, b)
		}
		from = max(from, tok) + writers
	}
	vs.report(t, "check and write are not one atomic step (F2)")
}
