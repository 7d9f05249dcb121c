// Package locals declares, at package level, the names the generated code
// would use for its local variables and parameters: the generated code
// picks other local names, so that none hides a name it refers to. The
// generated exported names are never renamed.
package locals

import (
	"context"
	"iter"

	"github.com/simba-go/simba/runtime"
)

// Package-level names the generated code must not hide.
var (
	c, ctx, t, item, err, run, step, regs, register = 1, 2, 3, 4, 5, 6, 7, 8, 9
	context2                                        = "taken as well"
)

// time is a package-level name: simba_gen.go imports package time as time2.
const time = "noon"

// C is a receiver type whose parameter name would be c.
type C struct{}

// Do is a method of C.
//
//simba:scheduled lease=locals.do rate=1s step=100ms items=items
func (x *C) Do(ctx context.Context, t *runtime.Term, n int) error { return nil }

func (x *C) items(ctx context.Context, t *runtime.Term) iter.Seq2[int, error] { return nil }

// Use refers to RegisterAll, which simba_gen.go declares: simbagen reads
// the package without its previous output, and does not report the missing
// name.
func Use(cl *runtime.Client) ([]runtime.Registration, error) { return RegisterAll(cl, &C{}) }
