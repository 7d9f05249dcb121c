// Package schedulerecord is the lease value a schedule writes beside its
// lease after each successful run (§13): "simba/v1 rate <unix ms>" or
// "simba/v1 delay <unix ms>". The engine writes and reads it to know which
// slot not to run again; status tools (cmd/simba) read it from the store.
//
// The format is stored, so it is stable across versions: a new version reads
// what an older one wrote. Section names such as §13 refer to
// docs/design.md in the repository.
package schedulerecord

import (
	"strconv"
	"strings"
	"time"
)

// The kinds of schedule a record names.
const (
	Rate  = "rate"  // a fixed-rate schedule: the record is the start of the last slot whose run succeeded
	Delay = "delay" // a fixed-delay schedule: the record is when the last successful run ended
	Cron  = "cron"  // a cron or timetable schedule: the record is the instant of the last slot whose run succeeded
)

// prefix starts every record: the format's version.
const prefix = "simba/v1 "

// Record is what a schedule records beside its lease, in the lease's value,
// after each successful run: the record a node elected next reads to know
// what not to run again.
type Record struct {
	// Kind is Rate for a fixed-rate schedule, Delay for a fixed-delay one,
	// Cron for a cron or timetable schedule.
	Kind string
	// At is, for Rate, the start of the last slot whose run succeeded; for
	// Delay, when the last successful run ended; for Cron, the scheduled
	// instant of the last slot whose run succeeded. All are on the store's
	// clock, to the millisecond.
	At time.Time
}

// Encode returns the lease value that records a run of a schedule of kind:
// for Rate the start of its slot, for Delay its end, for Cron its slot's
// instant, in Unix milliseconds
// of the store's clock.
func Encode(kind string, at time.Time) []byte {
	return []byte(prefix + kind + " " + strconv.FormatInt(at.UnixMilli(), 10))
}

// DecodeKind reads a lease value written by Encode for kind; ok is false for
// any other value, a record of the other kind included.
func DecodeKind(v []byte, kind string) (at time.Time, ok bool) {
	rest, ok := strings.CutPrefix(string(v), prefix+kind+" ")
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Decode reads a lease value written by Encode, of any kind. It reports
// false for any other value: a lease that no schedule ran under, or a value
// written by something else.
func Decode(v []byte) (Record, bool) {
	for _, kind := range [...]string{Rate, Delay, Cron} {
		if at, ok := DecodeKind(v, kind); ok {
			return Record{Kind: kind, At: at}, true
		}
	}
	return Record{}, false
}
