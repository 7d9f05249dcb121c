// Package locals declares the names the generated code would give its
// local variables and parameters. Where the generated code refers to such
// a package-level name (an annotated function, a source, an imported
// package), or a parameter has it, the local gets the next name a person
// would pick (client, term, steps, batch, stdtime), never a number, so
// that it never hides what the code calls; package-level names it never
// refers to are left to be shadowed. The generated exported names are
// never renamed.
package locals

import (
	"context"
	"iter"
	"sync"

	"github.com/simba-go/simba/runtime"
)

// Package-level names the generated code does not refer to: its locals
// keep these names.
var c, ctx, t, item, err, regs, register = 1, 2, 3, 4, 5, 6, 7

// time is a package-level name: simba_gen.go imports package time as
// stdtime.
const time = "noon"

// A call is one call of run or Do, recorded for the test.
type call struct {
	fn    string
	n     int
	token runtime.Token
	valid bool // the term was valid when the function was called
}

var (
	mu    sync.Mutex
	calls []call
)

func record(fn string, t *runtime.Term, n int) {
	mu.Lock()
	defer mu.Unlock()
	calls = append(calls, call{fn, n, t.Token(), t.Valid()})
}

// run is annotated, and so referred to by RegisterRun, whose typed-steps
// wrapper is then named steps.
//
//simba:scheduled lease=locals.run rate=1s step=100ms items=items
func run(ctx context.Context, t *runtime.Term, n int) error {
	record("run", t, n)
	return nil
}

// items is the source of run: the slice it returns is held in batch.
func items(ctx context.Context, t *runtime.Term) ([]int, error) { return []int{1, 2, 3}, nil }

// C is a receiver type whose parameter is c, the client's name: the
// client is then named client.
type C struct{}

// Do is a method of C.
//
//simba:scheduled lease=locals.do rate=1s
func (x *C) Do(ctx context.Context, t *runtime.Term) error {
	record("Do", t, 0)
	return nil
}

// T is a receiver type whose parameter is t, the name of the term in the
// typed-steps wrapper: the wrapper's term is then named term.
type T struct{}

// Apply is a method of T, with typed steps from another method.
//
//simba:scheduled lease=locals.apply rate=1s items=Pending
func (x T) Apply(ctx context.Context, t *runtime.Term, s string) error {
	record("Apply", t, len(s))
	return nil
}

// Pending yields the items of Apply.
func (x T) Pending(ctx context.Context, t *runtime.Term) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) { yield("abcd", nil) }
}

// Error is a receiver type whose parameter would be error, which is
// predeclared: it takes the name that its method gives the receiver, e,
// and what StartSchedule returns, e elsewhere, is then named reg.
type Error struct{}

// Report is a method of Error.
//
//simba:scheduled lease=locals.report rate=1s
func (e *Error) Report(ctx context.Context, t *runtime.Term) error {
	record("Report", t, 0)
	return nil
}

// Use refers to RegisterAll, which simba_gen.go declares: simbagen reads
// the package without its previous output, and does not report the missing
// name.
func Use(cl *runtime.Client) ([]runtime.Registration, error) {
	return RegisterAll(cl, &C{}, T{}, &Error{})
}
