package methods

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// The generated RegisterAll takes each receiver once and runs the method
// on it.
func TestRegisterAll(t *testing.T) {
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	svc := &Service{Reports: new(atomic.Int64)}
	regs, err := RegisterAll(c, svc, &HTTPCache{})
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 3 {
		t.Fatalf("RegisterAll started %d; want 3", len(regs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for svc.Reports.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Report did not run in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
