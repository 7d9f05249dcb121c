// Package cronexpr is the project's adapter over github.com/robfig/cron/v3:
// it reads a cron expression into a schedule whose Next gives the scheduled
// instants, with the rules the runtime documents (R1 and R4 in docs/design.md):
//
//   - five fields (minute hour day-of-month month day-of-week) or six, with
//     seconds first; names such as JAN or MON, ranges, lists, steps and "?"
//     as robfig reads them;
//   - the standard day rule: when both day-of-month and day-of-week are
//     restricted, a day matching either runs (as Vixie cron does);
//   - the descriptors @yearly (@annually), @monthly, @weekly, @daily
//     (@midnight) and @hourly; @every is refused, since its instants depend
//     on when it is asked and not on the clock (a fixed rate says that);
//   - no TZ= or CRON_TZ= prefix (robfig panics on some of them): the
//     location is a separate argument, UTC when nil;
//   - daylight-saving time: the expression names wall-clock times in the
//     location; a time that does not exist (the spring gap) is skipped, and a
//     time that exists twice (the autumn overlap) is scheduled once, at its
//     first occurrence.
//
// Errors are *Error values that name the field at fault and its byte offset
// in the text, so a caller can point at it.
package cronexpr

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Field names, in the order of a six-field expression.
var fieldNames = [6]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

// parser reads six fields, all required: the adapter adds the seconds of a
// five-field expression itself, so that it knows which field is which.
var parser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// descriptors are the @ forms accepted.
var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// Error reports malformed cron text: the field at fault, if one is, and
// why.
type Error struct {
	Text   string // the whole expression
	Field  string // "second", "minute", "hour", "day-of-month", "month" or "day-of-week"; "" if the fault is not one field's
	Offset int    // the byte offset in Text of the field at fault (of the text when Field is "")
	Value  string // the field's text, "" when Field is ""
	Reason string // what is wrong and what was expected
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("cron expression %q: %s", e.Text, e.Reason)
	}
	return fmt.Sprintf("cron expression %q: %s field %q: %s", e.Text, e.Field, e.Value, e.Reason)
}

// Schedule is a parsed cron expression in a location.
type Schedule struct {
	text string
	loc  *time.Location
	spec *cron.SpecSchedule
}

// String returns the expression as given.
func (s *Schedule) String() string { return s.text }

// Location returns the location the expression's wall-clock times are read
// in.
func (s *Schedule) Location() *time.Location { return s.loc }

// field is one whitespace-separated field of the text and its offset.
type field struct {
	text   string
	offset int
}

func split(text string) []field {
	var fs []field
	start := -1
	for i := 0; i <= len(text); i++ {
		space := i == len(text) || text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r' || text[i] == '\v' || text[i] == '\f'
		switch {
		case space && start >= 0:
			fs = append(fs, field{text[start:i], start})
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	return fs
}

// Parse reads text as a cron expression whose wall-clock times are in loc
// (UTC when loc is nil). It never panics.
func Parse(text string, loc *time.Location) (s *Schedule, err error) {
	if loc == nil {
		loc = time.UTC
	}
	defer func() {
		if r := recover(); r != nil { // robfig is not ours: never let it crash a caller
			s, err = nil, &Error{Text: text, Reason: fmt.Sprintf("not a cron expression the parser can read (%v)", r)}
		}
	}()
	fs := split(text)
	if len(fs) == 0 {
		return nil, &Error{Text: text, Reason: "empty; want 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or a descriptor such as @daily"}
	}
	first := fs[0]
	if strings.HasPrefix(first.text, "TZ=") || strings.HasPrefix(first.text, "CRON_TZ=") {
		return nil, &Error{Text: text, Offset: first.offset, Reason: "a time zone prefix is not accepted; give the location separately (Schedule.Location, or tz= in a directive)"}
	}
	if strings.HasPrefix(first.text, "@") {
		if len(fs) != 1 || !descriptors[first.text] {
			return nil, &Error{Text: text, Offset: first.offset, Reason: "unknown descriptor; want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly (for a fixed interval, use a rate)"}
		}
		sched, err := parser.Parse(first.text)
		if err != nil {
			return nil, &Error{Text: text, Offset: first.offset, Reason: err.Error()}
		}
		return newSchedule(text, loc, sched)
	}
	names := fieldNames[:]
	six := make([]string, 0, 6)
	switch len(fs) {
	case 5:
		names = names[1:]
		six = append(six, "0")
	case 6:
	default:
		n := fmt.Sprintf("%d fields", len(fs))
		if len(fs) == 1 {
			n = "1 field"
		}
		return nil, &Error{Text: text, Reason: n + "; want 5 (minute hour day-of-month month day-of-week) or 6 (second first)"}
	}
	for _, f := range fs {
		six = append(six, f.text)
	}
	sched, err := parser.Parse(strings.Join(six, " "))
	if err == nil {
		return newSchedule(text, loc, sched)
	}
	// Name the field at fault: parse each field alone, the others "*".
	for i, f := range fs {
		alone := []string{"0", "*", "*", "*", "*", "*"}
		alone[i+6-len(fs)] = f.text
		if _, ferr := parser.Parse(strings.Join(alone, " ")); ferr != nil {
			return nil, &Error{Text: text, Field: names[i], Offset: f.offset, Value: f.text, Reason: ferr.Error()}
		}
	}
	return nil, &Error{Text: text, Reason: err.Error()}
}

func newSchedule(text string, loc *time.Location, sched cron.Schedule) (*Schedule, error) {
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, &Error{Text: text, Reason: fmt.Sprintf("parsed to %T, not a calendar schedule", sched)}
	}
	spec.Location = loc
	return &Schedule{text: text, loc: loc, spec: spec}, nil
}

// Next returns the first scheduled instant strictly after t, or the zero
// time if there is none within five years (as for February 30). The
// instant is in s's location. An instant whose wall-clock time occurred
// earlier that day (the second pass of the autumn overlap) is passed over.
func (s *Schedule) Next(t time.Time) time.Time {
	// A repeated wall-clock time can only follow a fall of the offset, at
	// most a few times in a row; the bound keeps a strange zone from looping.
	for range 64 {
		t = s.spec.Next(t)
		if t.IsZero() || !repeated(t, s.loc) {
			return t
		}
	}
	return time.Time{}
}

// repeated reports whether the wall-clock time of t in loc occurred at an
// earlier instant too: t falls in the second pass of an autumn overlap.
func repeated(t time.Time, loc *time.Location) bool {
	t = t.In(loc)
	_, off := t.Zone()
	for _, back := range [...]time.Duration{3 * time.Hour, 24 * time.Hour} {
		_, before := t.Add(-back).Zone()
		if before <= off {
			continue
		}
		earlier := t.Add(-time.Duration(before-off) * time.Second)
		if _, o := earlier.Zone(); o == before && sameWall(earlier, t) {
			return true
		}
	}
	return false
}

func sameWall(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute() && a.Second() == b.Second()
}
