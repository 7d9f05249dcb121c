// Package guardlog logs a backend's amnesia guard (§15) the same way in
// every backend: one warning per guard period, not one per refused grant,
// saying why grants wait, until when, and how to shorten the wait.
//
// Rule names and sections such as §15 refer to docs/design.md in the
// repository.
package guardlog

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
)

// Log remembers the guard period it last logged. The zero Log is ready to
// use; it is safe for concurrent use.
type Log struct {
	until atomic.Int64 // Unix µs, on the local clock, when the guard last logged ends
}

// Refused logs e, the refusal of a grant, at the Warn level through l, with
// prefix ("simbaredis") and attrs (the namespace), unless the guard period
// it belongs to was logged already: a refusal whose guard ends within a
// second of the end last logged, on the local clock. A guard that starts
// again later (a second loss) is logged again.
func (g *Log) Refused(l *slog.Logger, prefix string, e *backends.RecoveringError, attrs ...slog.Attr) {
	end := time.Now().Add(e.Remaining).UnixMicro()
	last := g.until.Load()
	if end-last < int64(time.Second/time.Microsecond) || !g.until.CompareAndSwap(last, end) {
		return
	}
	attrs = append(attrs, slog.Duration("remaining", e.Remaining), slog.Duration("max_lease", e.MaxLease))
	if !e.Until.IsZero() {
		attrs = append(attrs, slog.Time("until", e.Until))
	}
	l.LogAttrs(context.Background(), slog.LevelWarn, prefix+": no lease is granted for now: "+e.Error(), attrs...)
}
