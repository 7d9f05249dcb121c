package simbapg

import (
	"time"

	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 2 s lease,
// renewed every 667 ms; the local validity is 2 s × 0.99 − 50 ms = 1.93 s.
var testConfig = runtime.ConfigFor(2 * time.Second)
