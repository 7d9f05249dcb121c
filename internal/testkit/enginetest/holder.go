package enginetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// StartHolder starts a client on b with cfg that leads n elections (held-0,
// held-1, …) and counts its successful renewals in renewals. It returns once
// every election is held and two renewals have followed, so that what the
// caller counts next is the holder's steady state. The client is closed when
// the test ends.
func StartHolder(t *testing.T, b backends.Backend, cfg runtime.Config, n int) (c *runtime.Client, renewals *atomic.Int64) {
	t.Helper()
	renewals = new(atomic.Int64)
	c, err := runtime.NewClient(b, cfg, runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventSessionRenewed {
			renewals.Add(1)
		}
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	elections := make([]*runtime.Election, n)
	for i := range elections {
		if elections[i], err = c.StartElection(fmt.Sprintf("held-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		held := 0
		for _, e := range elections {
			if e.Term() != nil {
				held++
			}
		}
		if held == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d elections won within 10s", held, n)
		}
	}
	for r := renewals.Load(); renewals.Load() < r+2; time.Sleep(10 * time.Millisecond) {
	}
	return c, renewals
}
