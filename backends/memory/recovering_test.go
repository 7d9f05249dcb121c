package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
)

// §15: a grant refused by the amnesia guard after a restart says why, until
// when on the store clock, and how to shorten the wait.
func TestRecoveringVisible(t *testing.T) {
	store := memory.New(memory.WithMaxLease(time.Minute))
	store.Faults().Restart()
	ctx := context.Background()
	s, _, err := store.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	_, err = s.Acquire(ctx, "lease")
	var re *backends.RecoveringError
	if !errors.As(err, &re) || !errors.Is(err, backends.ErrRecovering) || !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire after a restart = %v; want a *backends.RecoveringError matching ErrRecovering and ErrLeaseHeld", err)
	}
	now, serr := store.StoreTime(ctx)
	if serr != nil {
		t.Fatal(serr)
	}
	if re.MaxLease != time.Minute || re.Remaining <= 0 || re.Remaining > time.Minute || re.Until.Before(now) || re.Until.After(now.Add(time.Minute)) {
		t.Errorf("RecoveringError %+v at store time %v; want MaxLease 1m, 0 < Remaining ≤ 1m, Until within the next minute", *re, now)
	}
	for _, s := range []string{"restarted", "grants resume in", "WithMaxLease", "simba_max_lease"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not say %q", err, s)
		}
	}
}
