package zookeeper

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tests/internal/serial"
)

// TestMain runs the tests, checking that they leak no goroutine, while no
// other package of the tests module that loads the machine runs (package
// serial): the elections here are timed.
func TestMain(m *testing.M) {
	unlock := serial.Lock()
	defer unlock()
	goleak.VerifyTestMain(m)
}
