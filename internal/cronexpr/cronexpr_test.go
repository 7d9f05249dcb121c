package cronexpr

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

// nexts returns the n instants after from.
func nexts(t *testing.T, text string, loc *time.Location, from string, n int) []time.Time {
	t.Helper()
	s, err := Parse(text, loc)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	at, err := time.Parse(time.RFC3339, from)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for range n {
		at = s.Next(at)
		out = append(out, at)
	}
	return out
}

func utc(ts ...string) []time.Time {
	var out []time.Time
	for _, s := range ts {
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		out = append(out, at.UTC())
	}
	return out
}

func sameInstants(t *testing.T, got, want []time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("instant %d: got %v (%v), want %v", i, got[i].UTC(), got[i], want[i])
		}
	}
}

func TestFieldsAndSeconds(t *testing.T) {
	// Five fields: seconds are 0.
	sameInstants(t, nexts(t, "*/20 * * * *", nil, "2026-01-01T10:05:07Z", 3),
		utc("2026-01-01T10:20:00Z", "2026-01-01T10:40:00Z", "2026-01-01T11:00:00Z"))
	// Six fields: seconds first.
	sameInstants(t, nexts(t, "*/20 * * * * *", nil, "2026-01-01T10:05:07Z", 3),
		utc("2026-01-01T10:05:20Z", "2026-01-01T10:05:40Z", "2026-01-01T10:06:00Z"))
	// Next is strictly after its argument.
	sameInstants(t, nexts(t, "0 * * * * *", nil, "2026-01-01T10:05:00Z", 1), utc("2026-01-01T10:06:00Z"))
	// A location: 09:00 in Paris is 08:00 UTC in winter.
	sameInstants(t, nexts(t, "0 9 * * *", mustLoad(t, "Europe/Paris"), "2026-01-01T00:00:00Z", 1), utc("2026-01-01T08:00:00Z"))
}

func TestDayOfMonthOrDayOfWeek(t *testing.T) {
	// Both restricted: either matches. 2026-03-01 is a Sunday; the 13th
	// (a Friday) and every Monday match.
	sameInstants(t, nexts(t, "0 0 13 * MON", nil, "2026-03-01T00:00:00Z", 4),
		utc("2026-03-02T00:00:00Z", "2026-03-09T00:00:00Z", "2026-03-13T00:00:00Z", "2026-03-16T00:00:00Z"))
	// One restricted: only it counts.
	sameInstants(t, nexts(t, "0 0 13 * *", nil, "2026-03-01T00:00:00Z", 2),
		utc("2026-03-13T00:00:00Z", "2026-04-13T00:00:00Z"))
}

func TestDescriptors(t *testing.T) {
	sameInstants(t, nexts(t, "@daily", nil, "2026-01-01T10:00:00Z", 2), utc("2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"))
	sameInstants(t, nexts(t, "@hourly", nil, "2026-01-01T10:00:00Z", 1), utc("2026-01-01T11:00:00Z"))
	sameInstants(t, nexts(t, "@monthly", nil, "2026-01-01T10:00:00Z", 1), utc("2026-02-01T00:00:00Z"))
}

// The spring gap: 02:30 does not exist on the day clocks go forward; that
// day has no run.
func TestSpringGapSkipped(t *testing.T) {
	sameInstants(t, nexts(t, "30 2 * * *", mustLoad(t, "America/New_York"), "2026-03-07T12:00:00Z", 2),
		utc("2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"))
	sameInstants(t, nexts(t, "30 2 * * *", mustLoad(t, "Europe/Paris"), "2026-03-28T12:00:00Z", 2),
		utc("2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"))
	// Every half hour: 02:00 and 02:30 are skipped, 03:00 follows 01:30.
	sameInstants(t, nexts(t, "*/30 * * * *", mustLoad(t, "Europe/Paris"), "2026-03-29T00:00:00Z", 2),
		utc("2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z"))
}

// The autumn overlap: 01:30 (New York) and 02:30 (Paris) happen twice on
// the day clocks go back; they run once, at the first.
func TestAutumnOverlapOnce(t *testing.T) {
	sameInstants(t, nexts(t, "30 1 * * *", mustLoad(t, "America/New_York"), "2026-10-31T12:00:00Z", 2),
		utc("2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"))
	sameInstants(t, nexts(t, "0 30 2 * * *", mustLoad(t, "Europe/Paris"), "2026-10-24T12:00:00Z", 2),
		utc("2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"))
	// Every half hour: the repeated 02:00 and 02:30 are not run again.
	sameInstants(t, nexts(t, "*/30 * * * *", mustLoad(t, "Europe/Paris"), "2026-10-25T00:15:00Z", 3),
		utc("2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z"))
}

func TestNoInstant(t *testing.T) {
	s, err := Parse("0 0 30 2 *", nil)
	if err != nil {
		t.Fatal(err)
	}
	if at := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); !at.IsZero() {
		t.Fatalf("February 30: Next = %v, want the zero time", at)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		text, field string
		offset      int
		reason      string // a part of the reason
	}{
		{"70 * * * *", "minute", 0, "above maximum"},
		{"0 */5 25 * * *", "hour", 6, "above maximum"},
		{"0 0 0 32 * *", "day-of-month", 6, "above maximum"},
		{"* * * 13 *", "month", 6, "above maximum"},
		{"* * * * XYZ", "day-of-week", 8, ""},
		{"*/0 * * * * *", "second", 0, "positive"},
		{"  5-1 * * * *", "minute", 2, "beyond end"},
		{"* * * *", "", 0, "4 fields"},
		{"* * * * * * *", "", 0, "7 fields"},
		{"", "", 0, "empty"},
		{"TZ=Europe/Paris 0 * * * *", "", 0, "time zone"},
		{"CRON_TZ=", "", 0, "time zone"},
		{"  TZ=", "", 2, "time zone"},
		{"@every 5s", "", 0, "descriptor"},
		{"@daily 5", "", 0, "descriptor"},
		{"@often", "", 0, "descriptor"},
	} {
		_, err := Parse(tc.text, nil)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", tc.text, err)
			continue
		}
		if e.Field != tc.field || e.Offset != tc.offset || !strings.Contains(e.Reason, tc.reason) {
			t.Errorf("Parse(%q): field %q at %d, reason %q; want field %q at %d, reason with %q",
				tc.text, e.Field, e.Offset, e.Reason, tc.field, tc.offset, tc.reason)
		}
		if tc.field != "" && !strings.Contains(e.Error(), tc.field+" field") {
			t.Errorf("Parse(%q): %q does not name the field", tc.text, e.Error())
		}
	}
}

// FuzzParse: no input panics, and a parsed schedule's Next is strictly
// after its argument, or zero.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0 */5 * * * *", "TZ=", "CRON_TZ=x 0 * * * *", "@daily", "@every 1s", "1-70/0 * * * *",
		"*/0 * * * *", "0 0 30 2 *", "? ? ? ? ? ?", "JAN-DEC/2 * * * *", "5,10-20/3 * L * *", "", "\t\n"} {
		f.Add(s)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		f.Fatal(err)
	}
	from := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text, paris)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse(%q) returned a schedule and an error", text)
			}
			return
		}
		at := from
		for range 3 {
			next := s.Next(at)
			if next.IsZero() {
				return
			}
			if !next.After(at) {
				t.Fatalf("Parse(%q).Next(%v) = %v, not after it", text, at, next)
			}
			at = next
		}
	})
}
