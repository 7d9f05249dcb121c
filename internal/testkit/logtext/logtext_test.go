package logtext

import (
	"log/slog"
	"reflect"
	"sync"
	"testing"
)

func TestLines(t *testing.T) {
	var b Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { log.Warn("guard", "remaining", "2s") })
	}
	wg.Wait()
	log.Info("granted")
	if got := len(b.Lines("level=WARN")); got != 4 {
		t.Errorf("%d warning lines; want 4", got)
	}
	info := b.Lines("msg=granted")
	if len(info) != 1 || info[0][len(info[0])-1] != '\n' {
		t.Errorf("lines holding msg=granted: %q; want one, with its newline", info)
	}
	if got := b.Lines("absent"); !reflect.DeepEqual(got, []string(nil)) {
		t.Errorf("lines holding absent: %q; want none", got)
	}
}
