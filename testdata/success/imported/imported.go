// Package imported covers item types from other packages (G2): the
// generated file imports them for its signature guards, including the
// type arguments of a generic type, an alias, and a package whose name the
// package also declares (imported under another name in simba_gen.go).
package imported

import (
	"context"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/simba-go/simba/runtime"
	m "github.com/simba-go/simba/testdata/success/imported/model"
)

// model is a package-level name that is also the name of an imported
// package: simba_gen.go imports that package as modelpkg.
var model = "not the package"

// A call is one call of Fulfil, Paginate or Punch, recorded for the test.
type call struct {
	fn    string
	item  any
	token runtime.Token
	valid bool // the term was valid when the function was called
}

var (
	mu    sync.Mutex
	calls []call
)

func record(fn string, t *runtime.Term, item any) {
	mu.Lock()
	defer mu.Unlock()
	calls = append(calls, call{fn, item, t.Token(), t.Valid()})
}

// Ticket is an alias of a type of another package; it is kept as written.
type Ticket = m.Order

// Fulfil takes an order.
//
//simba:scheduled lease=imported.fulfil rate=1m items=Orders
func Fulfil(ctx context.Context, t *runtime.Term, o m.Order) error {
	record("Fulfil", t, o)
	return nil
}

// Orders yields two orders.
func Orders(ctx context.Context, t *runtime.Term) iter.Seq2[m.Order, error] {
	return func(yield func(m.Order, error) bool) {
		_ = yield(m.Order{ID: "o1"}, nil) && yield(m.Order{ID: "o2"}, nil)
	}
}

// Paginate takes a page of a generic type of another package, instantiated
// with a type of a third package.
//
//simba:scheduled lease=imported.paginate delay=1m items=Pages
func Paginate(ctx context.Context, t *runtime.Term, p m.Page[time.Duration]) error {
	record("Paginate", t, p)
	return nil
}

// Pages returns one page.
func Pages(ctx context.Context, t *runtime.Term) ([]m.Page[time.Duration], error) {
	return []m.Page[time.Duration]{{Items: []time.Duration{time.Second, time.Minute}, Next: "p2"}}, nil
}

// Punch takes an alias and a map of another package's types.
//
//simba:partitioned group=imported.punch partitions=2 items=Punches
func Punch(ctx context.Context, t *runtime.Term, partition int, tk map[Ticket][]*m.Order) error {
	record("Punch", t, tk)
	return nil
}

// Punches yields one item of Punch per partition, named after it.
func Punches(ctx context.Context, t *runtime.Term, partition int) iter.Seq2[map[Ticket][]*m.Order, error] {
	return func(yield func(map[Ticket][]*m.Order, error) bool) {
		p := strconv.Itoa(partition)
		yield(map[Ticket][]*m.Order{{ID: "t" + p}: {{ID: "o" + p}}}, nil)
	}
}
