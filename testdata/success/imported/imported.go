// Package imported covers item types from other packages (SPEC G2): the
// generated file imports them for its signature guards, including the
// type arguments of a generic type, an alias, and a package whose name the
// package also declares (imported under another name in simba_gen.go).
package imported

import (
	"context"
	"iter"
	"time"

	"github.com/simba-go/simba/runtime"
	m "github.com/simba-go/simba/testdata/success/imported/model"
)

// model is a package-level name that is also the name of an imported
// package: simba_gen.go imports that package as model2.
var model = "not the package"

// Ticket is an alias of a type of another package; it is kept as written.
type Ticket = m.Order

// Fulfil takes an order.
//
//simba:scheduled lease=imported.fulfil rate=1m items=Orders
func Fulfil(ctx context.Context, t *runtime.Term, o m.Order) error { return nil }

// Orders yields orders.
func Orders(ctx context.Context, t *runtime.Term) iter.Seq2[m.Order, error] { return nil }

// Paginate takes a page of a generic type of another package, instantiated
// with a type of a third package.
//
//simba:scheduled lease=imported.paginate delay=1m items=Pages
func Paginate(ctx context.Context, t *runtime.Term, p m.Page[time.Duration]) error { return nil }

// Pages yields pages.
func Pages(ctx context.Context, t *runtime.Term) ([]m.Page[time.Duration], error) { return nil, nil }

// Punch takes an alias and a map of another package's types.
//
//simba:partitioned group=imported.punch partitions=2 items=Punches
func Punch(ctx context.Context, t *runtime.Term, partition int, tk map[Ticket][]*m.Order) error {
	return nil
}

// Punches yields the items of Punch.
func Punches(ctx context.Context, t *runtime.Term, partition int) iter.Seq2[map[Ticket][]*m.Order, error] {
	return nil
}
