package schedulerecord

import (
	"testing"
	"time"
)

// The stored format, byte for byte: what an older version wrote, a newer
// one reads, and what Encode writes, Decode reads back to the millisecond.
func TestFormat(t *testing.T) {
	at := time.UnixMilli(1796029200123)
	for _, kind := range []string{Rate, Delay, Cron} {
		v := Encode(kind, at.Add(456*time.Microsecond)) // below a millisecond: not recorded
		if want := "simba/v1 " + kind + " 1796029200123"; string(v) != want {
			t.Errorf("Encode(%s) = %q, want %q", kind, v, want)
		}
		rec, ok := Decode(v)
		if !ok || rec.Kind != kind || !rec.At.Equal(at) {
			t.Errorf("Decode(%q) = %+v, %v; want %s at %v", v, rec, ok, kind, at)
		}
		other := map[string]string{Rate: Delay, Delay: Cron, Cron: Rate}[kind]
		if _, ok := DecodeKind(v, other); ok {
			t.Errorf("DecodeKind(%q, %s) = ok; want false", v, other)
		}
	}
	for _, v := range []string{"", "simba/v1 rate", "simba/v1 rate x", "simba/v2 rate 1", "simba/v1 weekly 1", "simba/v1 rate 1 2", "simba/v1 cron"} {
		if rec, ok := Decode([]byte(v)); ok {
			t.Errorf("Decode(%q) = %+v, true; want false", v, rec)
		}
	}
}
