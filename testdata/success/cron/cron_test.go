package cron

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// The generated code starts the cron schedules, with their locations, and
// EverySecond runs on the second (R1).
func TestRegisterAllRuns(t *testing.T) {
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
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
	deadline := time.Now().Add(10 * time.Second)
	for Slots.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("EverySecond ran %d times in 10s; want at least 2", Slots.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ms := Last.Load(); ms%1000 != 0 {
		t.Errorf("last slot %d ms is not on a second", ms)
	}
	for _, r := range regs {
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("Stop %s: %v", r.Name(), err)
		}
	}
}
