package guardlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// One warning per guard period: refusals of one guard log once; a guard
// that starts again later logs again.
func TestOnePerGuard(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	var g Log
	e := &backends.RecoveringError{Remaining: 10 * time.Second, MaxLease: 10 * time.Second, Why: "lost"}
	for range 5 {
		g.Refused(l, "simbatest", e, slog.String("prefix", "p"))
		e.Remaining -= 100 * time.Millisecond // later refusals of the same guard
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for five refusals of one guard:\n%s", n, buf.String())
	}
	for _, s := range []string{"simbatest: no lease is granted for now: store recovering", "prefix=p", "remaining=10s", "max_lease=10s"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("the warning does not say %q:\n%s", s, buf.String())
		}
	}
	// A second loss, after the first guard: its end is later by more than a
	// second.
	e.Remaining = 30 * time.Second
	g.Refused(l, "simbatest", e)
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings after a second guard started; want 2:\n%s", n, buf.String())
	}
}
