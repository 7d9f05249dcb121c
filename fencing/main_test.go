package fencing_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine of ours outlives a test: the gates release what they hold
// when a write is over, and the servers and clients the tests start are
// closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
