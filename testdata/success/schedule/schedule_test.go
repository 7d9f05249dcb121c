package schedule

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	simbart "github.com/simba-go/simba/runtime"
)

// The generated RegisterAll starts every schedule, and Report runs at its
// rate on the memory backend (G3).
func TestRegisterAllRuns(t *testing.T) {
	c, err := simbart.NewClient(memory.New(), simbart.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	regs, err := RegisterAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 3 {
		t.Fatalf("RegisterAll started %d registrations; want 3", len(regs))
	}
	for _, name := range []string{"schedule.report", "schedule.cleanup", "schedule.hourly"} {
		if !hasName(regs, name) {
			t.Errorf("no registration named %q", name)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for Runs.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Report ran %d times in 10s; want at least 2 at rate=50ms", Runs.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, r := range regs {
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("Stop %s: %v", r.Name(), err)
		}
	}
}

// G3: RegisterAll undoes a partial registration. With a 600ms lease,
// Cleanup's step=1500ms can never pass, so its StartSchedule fails; Report,
// started before it, must be stopped again, which frees its name.
func TestRegisterAllUndoes(t *testing.T) {
	c, err := simbart.NewClient(memory.New(), simbart.ConfigFor(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	regs, err := RegisterAll(c)
	if !errors.Is(err, simbart.ErrInvalidConfig) || regs != nil {
		t.Fatalf("RegisterAll = %v, %v; want nil and an error matching ErrInvalidConfig", regs, err)
	}
	r, err := RegisterReport(c)
	if err != nil {
		t.Fatalf("RegisterReport after a failed RegisterAll: %v; want the name free again", err)
	}
	r.Stop(context.Background())
}

func hasName(regs []simbart.Registration, name string) bool {
	for _, r := range regs {
		if r.Name() == name {
			return true
		}
	}
	return false
}
