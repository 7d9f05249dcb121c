package main

import (
	"testing"
	"time"
)

// TestLastSlot pins the LAST SLOT column: the slot's start, how long ago it
// was on the store's clock, and no "ago" for a slot that started a moment
// ahead of that clock (a node's estimate of it runs ahead by up to one round
// trip).
func TestLastSlot(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 22, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    *ScheduleAt
		now  time.Time
		want string
	}{
		{"none", nil, at, "-"},
		{"rate, past", &ScheduleAt{Kind: "rate", At: at}, at.Add(1500 * time.Millisecond), "2026-12-01 10:22:00.000Z (1.5s ago)"},
		{"rate, now", &ScheduleAt{Kind: "rate", At: at}, at, "2026-12-01 10:22:00.000Z (0.0s ago)"},
		{"rate, ahead of the store's clock", &ScheduleAt{Kind: "rate", At: at}, at.Add(-22 * time.Millisecond), "2026-12-01 10:22:00.000Z"},
		{"rate, no store clock", &ScheduleAt{Kind: "rate", At: at}, time.Time{}, "2026-12-01 10:22:00.000Z"},
		{"delay", &ScheduleAt{Kind: "delay", At: at}, at.Add(90 * time.Second), "ended 2026-12-01 10:22:00.000Z (1m30s ago)"},
	} {
		if got := lastSlot(tc.s, tc.now); got != tc.want {
			t.Errorf("%s: lastSlot = %q, want %q", tc.name, got, tc.want)
		}
	}
}
