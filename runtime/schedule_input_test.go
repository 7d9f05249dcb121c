package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/schedulerecord"
	"github.com/simba-go/simba/runtime"
)

// Schedule.Delay follows Rate's rule: at least 1ms, the unit in which the
// end of a run is recorded, so that no delay is silently cut short across a
// fail-over. The error names the field and its value, for schedules and
// scheduled groups alike.
func TestScheduleDelayAtLeastAMillisecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		ok := func(context.Context, *runtime.Term) error { return nil }
		part := func(context.Context, *runtime.Term, int) error { return nil }
		for _, tc := range []struct {
			delay time.Duration
			want  string
		}{
			{time.Nanosecond, "Schedule.Delay = 1ns; want >= 1ms"},
			{500 * time.Microsecond, "Schedule.Delay = 500µs; want >= 1ms"},
			{time.Millisecond - 1, "Schedule.Delay = 999.999µs; want >= 1ms"},
		} {
			s := runtime.Schedule{Delay: tc.delay}
			_, err := c.StartSchedule("report", s, ok)
			if !errors.Is(err, runtime.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"report"`) {
				t.Errorf("StartSchedule(%+v) = %v, want an error containing %q", s, err, tc.want)
			}
			_, err = c.StartGroup("billing", 4, s, part)
			if !errors.Is(err, runtime.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"billing"`) {
				t.Errorf("StartGroup(%+v) = %v, want an error containing %q", s, err, tc.want)
			}
		}
		if _, err := c.StartSchedule("report", runtime.Schedule{Delay: time.Millisecond}, ok); err != nil {
			t.Errorf("Delay of 1ms rejected: %v", err)
		}
		if _, err := c.StartGroup("billing", 4, runtime.Schedule{Delay: time.Millisecond}, part); err != nil {
			t.Errorf("group with a Delay of 1ms rejected: %v", err)
		}
	})
}

// Slots are counted in whole milliseconds of the store's clock, so a Rate
// with a fraction of a millisecond is refused rather than run at the
// truncated rate (1.5ms would run every 1ms).
func TestScheduleRateWholeMilliseconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		ok := func(context.Context, *runtime.Term) error { return nil }
		for _, tc := range []struct {
			rate time.Duration
			want string
		}{
			{1500 * time.Microsecond, "Schedule.Rate = 1.5ms; want >= 1ms, a whole number of milliseconds"},
			{10*time.Second + time.Nanosecond, "Schedule.Rate = 10.000000001s; want >= 1ms, a whole number of milliseconds"},
		} {
			s := runtime.Schedule{Rate: tc.rate}
			_, err := c.StartSchedule("report", s, ok)
			if !errors.Is(err, runtime.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartSchedule(%+v) = %v, want an error containing %q", s, err, tc.want)
			}
		}
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: 1001 * time.Millisecond}, ok); err != nil {
			t.Errorf("Rate of 1001ms rejected: %v", err)
		}
	})
}

// schedulerecord.Decode reads what a running schedule wrote beside its
// lease, as a status tool sees it in the store.
func TestDecodeScheduleValueReadsTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		const rate = time.Minute
		ran := make(chan struct{}, 1)
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: rate}, func(ctx context.Context, term *runtime.Term) error {
			select {
			case ran <- struct{}{}:
			default:
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		<-ran
		synctest.Wait() // the record is written after the run returns
		inv, err := store.Inspect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Leases) != 1 {
			t.Fatalf("leases in the store: %+v; want the schedule's", inv.Leases)
		}
		rec, ok := schedulerecord.Decode(inv.Leases[0].Value)
		slot := time.UnixMilli(time.Now().UnixMilli() / rate.Milliseconds() * rate.Milliseconds())
		if !ok || rec.Kind != "rate" || !rec.At.Equal(slot) {
			t.Fatalf("schedulerecord.Decode(%q) = %+v, %v; want rate, slot %v", inv.Leases[0].Value, rec, ok, slot)
		}
		for _, v := range []string{"", "simba/v1 rate", "simba/v1 rate x", "simba/v2 rate 1", "simba/v1 weekly 1"} {
			if rec, ok := schedulerecord.Decode([]byte(v)); ok {
				t.Errorf("schedulerecord.Decode(%q) = %+v, true; want false", v, rec)
			}
		}
		closeClient(t, c)
	})
}
