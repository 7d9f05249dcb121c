package fencing_test

import (
	"errors"
	"fmt"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/fencing"
)

// A Guard fences state that lives in this process. Each write passes the
// token of the term it belongs to (term.Token() in package runtime); a write
// from an older term, arriving late, is refused.
func ExampleGuard() {
	var (
		guard  fencing.Guard
		report string
	)
	publish := func(token backends.Token, text string) error {
		return guard.Do(token, func() error {
			report = text
			return nil
		})
	}

	fmt.Println(publish(7, "report of term 7"))
	fmt.Println(publish(8, "report of term 8"))
	err := publish(7, "late report of term 7") // the old holder woke up
	fmt.Println(errors.Is(err, fencing.ErrStaleToken))
	fmt.Println(report)
	// Output:
	// <nil>
	// <nil>
	// true
	// report of term 8
}
