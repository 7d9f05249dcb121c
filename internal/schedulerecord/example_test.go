package schedulerecord_test

import (
	"fmt"
	"time"

	"github.com/simba-go/simba/internal/schedulerecord"
)

// A status tool reads a schedule's last completed slot from the lease's
// value, as the store lists it (backends.Inspector).
func ExampleDecode() {
	rec, ok := schedulerecord.Decode([]byte("simba/v1 rate 1796029200000"))
	fmt.Println(ok, rec.Kind, rec.At.UTC().Format(time.RFC3339))
	_, ok = schedulerecord.Decode([]byte("something else"))
	fmt.Println(ok)
	// Output:
	// true rate 2026-11-30T09:00:00Z
	// false
}
