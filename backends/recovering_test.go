package backends_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// §15: the amnesia guard's refusal matches ErrRecovering and ErrLeaseHeld
// through a backend's wrapping, and errors.As finds what it says.
func TestRecoveringError(t *testing.T) {
	until := time.Date(2026, 12, 3, 12, 0, 41, 123e6, time.UTC)
	e := &backends.RecoveringError{Remaining: 41 * time.Second, Until: until, MaxLease: time.Minute, Why: "Redis lost its state"}
	err := fmt.Errorf("simbaredis: acquire %q: %w", "report", e)
	var got *backends.RecoveringError
	if !errors.Is(err, backends.ErrRecovering) || !errors.Is(err, backends.ErrLeaseHeld) || !errors.As(err, &got) || got != e {
		t.Fatalf("%v: want it to match ErrRecovering and ErrLeaseHeld, and errors.As to find the RecoveringError", err)
	}
	if errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("%v matches ErrSessionExpired", err)
	}
	const want = `simbaredis: acquire "report": store recovering from a loss of state: Redis lost its state; ` +
		`grants resume in 41s (at 12:00:41.123Z on the store's clock): the amnesia guard waits out the longest lease ` +
		`the store grants (1m0s), which an old holder may still believe it holds; a shorter one (the backend's ` +
		`WithMaxLease, simba_max_lease= in its URL) shortens the wait`
	if err.Error() != want {
		t.Errorf("message:\n%s\nwant\n%s", err, want)
	}
	// A store without a clock, or that does not say, gives no Until.
	e = &backends.RecoveringError{Remaining: 1500 * time.Microsecond, MaxLease: 5 * time.Second}
	const want2 = `store recovering from a loss of state; grants resume in 2ms: the amnesia guard waits out the longest ` +
		`lease the store grants (5s), which an old holder may still believe it holds; a shorter one (the backend's ` +
		`WithMaxLease, simba_max_lease= in its URL) shortens the wait`
	if e.Error() != want2 {
		t.Errorf("message:\n%s\nwant\n%s", e, want2)
	}
}
