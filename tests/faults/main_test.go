package faults

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/simba-go/simba/tests/internal/serial"
)

// The flags of a run; see the package documentation.
var (
	flagSeed      = flag.Int64("faults.seed", 0, "seed of the first schedule (0: one from the clock); schedule i runs seed+i")
	flagSchedules = flag.Int("faults.schedules", 12, "schedules per backend")
	flagFaults    = flag.Int("faults.faults", 2, "faults per schedule")
	flagLease     = flag.Duration("faults.lease", 1500*time.Millisecond, "lease duration of the nodes")
	flagNodes     = flag.Int("faults.nodes", 3, "node processes per schedule")
	// Two lanes a backend (six servers, 18 node processes on 1.5 s leases):
	// with four, under -race on 2 cores, the load reached 19 and the nodes'
	// calls timed out for longer than the liveness bound.
	flagParallel = flag.Int("faults.parallel", 2, "schedules of one backend run at a time (each on a server of its own)")
)

// TestMain runs the node when the test binary was started as one (nodeEnv
// set), and the tests otherwise, one package of the tests module at a time
// (package serial).
func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) != "" {
		os.Exit(nodeMain())
	}
	unlock := serial.Lock() // not beside tests/zookeeper's timed elections
	code := m.Run()
	unlock()
	os.Exit(code)
}
