// Package cron covers //simba:scheduled and //simba:partitioned with a
// cron expression (R1, R3): quoted with spaces, a descriptor unquoted, a
// time zone, the overlap policy and the catch-up window.
package cron

import (
	"context"
	"sync/atomic"

	"github.com/simba-go/simba/runtime"
)

// Slots counts the runs of EverySecond, for the test; Last is the slot of
// its last run, in Unix milliseconds.
var (
	Slots atomic.Int64
	Last  atomic.Int64
)

// EverySecond runs on every second of Paris's wall clock, catching up a
// slot missed in a fail-over if it is at most a minute old.
//
//simba:scheduled lease=cron.second cron="* * * * * *" tz=Europe/Paris catchup=1m
func EverySecond(ctx context.Context, t *runtime.Term) error {
	slot, _ := runtime.ScheduledSlot(ctx)
	Slots.Add(1)
	Last.Store(slot.UnixMilli())
	return nil
}

// Report runs every five minutes in New York; a slot that comes while a
// run goes on runs when it returns.
//
//simba:scheduled lease=cron.report cron="0 */5 * * * *" tz=America/New_York overlap=after step=1s
func Report(ctx context.Context, t *runtime.Term) error { return nil }

// Nightly runs each partition at midnight UTC.
//
//simba:partitioned group=cron.nightly partitions=4 cron=@daily overlap=skip
func Nightly(ctx context.Context, t *runtime.Term, partition int) error { return nil }
