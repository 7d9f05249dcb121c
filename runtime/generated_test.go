package runtime_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime"
)

type fakeReg struct {
	name    string
	stopped *[]string
	err     error
}

func (f fakeReg) Name() string { return f.name }
func (f fakeReg) Stop(context.Context) error {
	*f.stopped = append(*f.stopped, f.name)
	return f.err
}
func (f fakeReg) StepDown(context.Context, time.Duration) error { return nil }

// G3: StartAll (what generated RegisterAll calls) starts in order; on a
// failure it stops what it started, newest first, and leaves nothing running.
func TestStartAll(t *testing.T) {
	var stopped []string
	start := func(name string, err error) func() (runtime.Registration, error) {
		return func() (runtime.Registration, error) {
			if err != nil {
				return nil, err
			}
			return fakeReg{name: name, stopped: &stopped, err: map[string]error{"b": errors.New("b stuck")}[name]}, nil
		}
	}
	regs, err := runtime.StartAll(start("a", nil), start("b", nil))
	if err != nil || len(regs) != 2 || regs[0].Name() != "a" || regs[1].Name() != "b" {
		t.Fatalf("StartAll = %v, %v; want a and b", regs, err)
	}
	boom := errors.New("name in use")
	regs, err = runtime.StartAll(start("a", nil), start("b", nil), start("c", boom), start("d", nil))
	if regs != nil || !errors.Is(err, boom) || err.Error() != "name in use\nb stuck" {
		t.Fatalf("StartAll with a failure = %v, %q; want nil and the failure joined with b's stop error", regs, err)
	}
	if !slices.Equal(stopped, []string{"b", "a"}) {
		t.Fatalf("stopped %v; want b then a (newest first), and d never started", stopped)
	}
}
