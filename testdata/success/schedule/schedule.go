// Package schedule covers //simba:scheduled on functions, with every key
// but items (G1): rate, delay, initial and step, and the runtime
// imported under the same alias the generated file uses.
package schedule

import (
	"context"
	"sync/atomic"

	simbart "github.com/simba-go/simba/runtime"
)

// Runs counts the runs of Report, for the test.
var Runs atomic.Int64

// Report runs at a fixed rate: once per 50ms slot of the store's clock.
//
//simba:scheduled lease=schedule.report rate=50ms
func Report(ctx context.Context, t *simbart.Term) error {
	Runs.Add(1)
	return nil
}

// Cleanup runs 90 seconds after the previous run ended, the first time 10
// seconds after each election, and only with 1.5s of validity left.
//
//simba:scheduled lease=schedule.cleanup delay=1m30s initial=10s step=1500ms
func Cleanup(ctx context.Context, t *simbart.Term) error { return nil }

// An unexported function gets an exported Register function too.
//
//simba:scheduled step=2s rate=1h lease=schedule.hourly
func hourly(ctx context.Context, t *simbart.Term) error { return nil }
