// Package locals declares the names the generated code would give its
// local variables and parameters. Where the generated code refers to such
// a package-level name (an annotated function, a source, an imported
// package), the local gets another name, so that it never hides what the
// code calls; package-level names it never refers to are left to be
// shadowed. The generated exported names are never renamed.
package locals

import (
	"context"
	"sync"

	"github.com/simba-go/simba/runtime"
)

// Package-level names the generated code does not refer to: its locals
// keep these names.
var c, ctx, t, item, err, regs, register = 1, 2, 3, 4, 5, 6, 7

// time is a package-level name: simba_gen.go imports package time as time2.
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
// wrapper is then named run2.
//
//simba:scheduled lease=locals.run rate=1s step=100ms items=items
func run(ctx context.Context, t *runtime.Term, n int) error {
	record("run", t, n)
	return nil
}

// items is the source of run: the slice it returns is held in items2.
func items(ctx context.Context, t *runtime.Term) ([]int, error) { return []int{1, 2, 3}, nil }

// C is a receiver type whose parameter would be c, the client's name.
type C struct{}

// Do is a method of C.
//
//simba:scheduled lease=locals.do rate=1s
func (x *C) Do(ctx context.Context, t *runtime.Term) error {
	record("Do", t, 0)
	return nil
}

// Use refers to RegisterAll, which simba_gen.go declares: simbagen reads
// the package without its previous output, and does not report the missing
// name.
func Use(cl *runtime.Client) ([]runtime.Registration, error) { return RegisterAll(cl, &C{}) }
