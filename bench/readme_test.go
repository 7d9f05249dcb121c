package bench

import (
	"strings"
	"testing"
	"time"
)

// make compare rewrites only the region between the markers, and refuses a
// file without them rather than losing the text around them.
func TestReplaceRegion(t *testing.T) {
	doc := "# Title\n\nbefore\n\n<!-- compare:begin (written by make compare) -->\nold table\n<!-- compare:end -->\n\nafter\n"
	out, err := replaceRegion([]byte(doc), []byte("| new |\n"), time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"# Title\n\nbefore\n\n<!-- compare:begin (written by make compare) -->\nMeasured on ", ", 2026-12-03:\n\n| new |\n<!-- compare:end -->\n\nafter\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten file lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old table") {
		t.Errorf("the old table is still there:\n%s", got)
	}
	for _, bad := range []string{"no markers\n", "<!-- compare:end -->\n<!-- compare:begin -->\n"} {
		if _, err := replaceRegion([]byte(bad), nil, time.Now()); err == nil {
			t.Errorf("replaceRegion(%q): no error", bad)
		}
	}
}
