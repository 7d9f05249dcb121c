package termcheck_test

import (
	"fmt"
	"time"

	"github.com/simba-go/simba/internal/testkit/termcheck"
)

// Two nodes' terms of one lease, rebuilt from what they logged: the second
// began 20 ms before the first's validity ended.
func ExampleCheck() {
	terms := []termcheck.Term{
		{Name: "report", Node: "n1", Token: 41, Start: 0, End: 1500 * time.Millisecond},
		{Name: "report", Node: "n2", Token: 57, Start: 1480 * time.Millisecond, End: 3 * time.Second},
	}
	writes := []termcheck.Write{
		{Name: "report", Node: "n2", Token: 57, At: 1490 * time.Millisecond, Accepted: true},
		{Name: "report", Node: "n1", Token: 41, At: 1495 * time.Millisecond, Accepted: false},
	}
	r := termcheck.Check(terms, writes, termcheck.Options{})
	fmt.Printf("%d terms, %d writes accepted, %d refused\n", r.Terms, r.Writes, r.Refused)
	fmt.Println(r.Err())
	// Output:
	// 2 terms, 1 writes accepted, 1 refused
	// overlap on report: n2's term with token 57 began at 1.480000s while n1's token 41 valid 0.000000s–1.500000s (at most 1 at once)
}
