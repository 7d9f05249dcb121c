// Package logtext is a log that tests read back as text: give a Buffer to
// slog.NewTextHandler, then ask which lines hold a string.
package logtext

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer keeps what is written to it; it is safe for concurrent use, as a
// logger shared by goroutines needs. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far that hold s, each with its newline.
func (b *Buffer) Lines(s string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}
