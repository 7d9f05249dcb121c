package engine

import (
	"testing"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// every is a timetable of instants every d from the Unix epoch, plus off.
type every struct{ d, off time.Duration }

func (e every) Next(t time.Time) time.Time {
	k := floorDiv(t.Add(-e.off).UnixNano(), int64(e.d))
	return time.Unix(0, (k+1)*int64(e.d)).Add(e.off)
}

// broken answers an instant that is not after its argument.
type broken struct{}

func (broken) Next(t time.Time) time.Time { return t }

func ms(n int64) time.Time { return time.UnixMilli(n) }

func TestNextSlotRoundsUpAndRefusesBrokenTimetables(t *testing.T) {
	// A slot at 1.5ms counts as 2ms: a node asking from 1ms or from
	// 1.2ms gets the same slot, and from 2ms the next one.
	tt := every{d: 10 * time.Millisecond, off: 1500 * time.Microsecond}
	for _, tc := range []struct{ from, want time.Time }{
		{ms(1), ms(2)}, {ms(1).Add(200 * time.Microsecond), ms(2)}, {ms(2), ms(12)},
	} {
		if got, ok := nextSlot(tt, tc.from); !ok || !got.Equal(tc.want) {
			t.Errorf("nextSlot(%v) = %v, %v; want %v", tc.from, got, ok, tc.want)
		}
	}
	if _, ok := nextSlot(broken{}, ms(5)); ok {
		t.Error("a timetable whose Next is not after its argument gave a slot")
	}
}

// latestSlot finds the latest slot in (lo, now] with few calls of Next,
// however dense the slots, and none when there is none.
func TestLatestSlot(t *testing.T) {
	for _, tc := range []struct {
		tt      every
		lo, now int64 // ms
		want    int64 // -1: none
	}{
		{every{d: time.Second}, 0, 5500, 5000},
		{every{d: time.Second}, 5000, 5500, -1}, // lo is excluded
		{every{d: time.Second}, 4999, 5000, 5000},
		{every{d: time.Millisecond}, 0, 86_400_000, 86_400_000},
		{every{d: time.Hour}, 0, 3_599_999, -1},
		{every{d: time.Second}, 5500, 5500, -1},
	} {
		calls := 0
		counting := vocab.Timetable(countingTimetable{tc.tt, &calls})
		got, ok := latestSlot(counting, ms(tc.lo), ms(tc.now))
		switch {
		case tc.want < 0 && ok:
			t.Errorf("%v (%d, %d]: got %v, want none", tc.tt, tc.lo, tc.now, got)
		case tc.want >= 0 && (!ok || got.UnixMilli() != tc.want):
			t.Errorf("%v (%d, %d]: got %v, %v; want %d", tc.tt, tc.lo, tc.now, got.UnixMilli(), ok, tc.want)
		}
		if calls > 64 {
			t.Errorf("%v (%d, %d]: %d calls of Next; want O(log)", tc.tt, tc.lo, tc.now, calls)
		}
	}
}

// A clock between milliseconds: the search ends (it once looped when now
// was 1.5ms past lo), and a slot after ⌊now⌋ is not yet due.
func TestLatestSlotBetweenMilliseconds(t *testing.T) {
	tt := every{d: time.Second}
	for _, tc := range []struct {
		lo, now time.Time
		want    int64
	}{
		{ms(3998), ms(3999).Add(500 * time.Microsecond), -1},
		{ms(3999), ms(4000).Add(500 * time.Microsecond), 4000},
		{ms(3000).Add(300 * time.Microsecond), ms(4001).Add(700 * time.Microsecond), 4000},
	} {
		got, ok := latestSlot(tt, tc.lo, tc.now)
		if tc.want < 0 && ok || tc.want >= 0 && (!ok || got.UnixMilli() != tc.want) {
			t.Errorf("(%v, %v]: got %v, %v; want %d", tc.lo, tc.now, got.UnixMilli(), ok, tc.want)
		}
	}
}

type countingTimetable struct {
	tt    vocab.Timetable
	calls *int
}

func (c countingTimetable) Next(t time.Time) time.Time { *c.calls++; return c.tt.Next(t) }

// planSlot: the catch-up window at a resumption, the overlap policy after
// a run, and the record of the last slot, which is never planned again.
func TestPlanSlot(t *testing.T) {
	tt := every{d: 10 * time.Second}
	for _, tc := range []struct {
		name     string
		spec     vocab.Schedule
		last     int64 // ms, -1 for none
		afterRun bool
		store    int64
		want     int64
	}{
		{"young missed slot caught up", vocab.Schedule{CatchUp: 4 * time.Second}, 10_000, false, 23_000, 20_000},
		{"old missed slot skipped", vocab.Schedule{CatchUp: 4 * time.Second}, 10_000, false, 25_000, 30_000},
		{"slot at the window's edge caught up", vocab.Schedule{CatchUp: 4 * time.Second}, -1, false, 24_000, 20_000},
		{"no catch-up by default", vocab.Schedule{}, -1, false, 20_001, 30_000},
		{"the slot of now runs", vocab.Schedule{}, -1, false, 20_000, 20_000},
		{"recorded slot not again", vocab.Schedule{CatchUp: time.Hour}, 20_000, false, 23_000, 30_000},
		{"a record ahead of the clock holds", vocab.Schedule{CatchUp: time.Hour}, 30_000, false, 23_000, 40_000},
		{"only the latest missed slot", vocab.Schedule{CatchUp: time.Hour}, 0, false, 45_000, 40_000},
		{"skip after a run", vocab.Schedule{CatchUp: time.Hour}, 10_000, true, 35_000, 40_000},
		{"after: the latest slot during the run", vocab.Schedule{Overlap: vocab.OverlapAfter}, 10_000, true, 35_000, 30_000},
		{"after: none during the run", vocab.Schedule{Overlap: vocab.OverlapAfter}, 10_000, true, 15_000, 20_000},
	} {
		spec := tc.spec
		spec.Timetable = tt
		r := &run{spec: spec, afterRun: tc.afterRun}
		if tc.last >= 0 {
			r.last, r.hasLast = ms(tc.last), true
		}
		got, ok := r.planSlot(ms(tc.store))
		if !ok || got.UnixMilli() != tc.want {
			t.Errorf("%s: planSlot = %v, %v; want %d", tc.name, got.UnixMilli(), ok, tc.want)
		}
	}
}
