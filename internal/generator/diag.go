package generator

import (
	"cmp"
	"fmt"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
)

// Diagnostic is one problem found in the input, at a position in a source
// file (the shape of go/scanner.Error).
type Diagnostic struct {
	Pos     token.Position // Filename is absolute
	Msg     string         // the message, without position or "warning: "
	Warning bool           // a warning does not stop generation
}

// Format returns "file:line:col: message", the go vet form, with the file
// relative to base when it lies below it, and "warning: " before the
// message of a warning.
func (d Diagnostic) Format(base string) string {
	file := d.Pos.Filename
	if base != "" && filepath.IsAbs(file) {
		if rel, err := filepath.Rel(base, file); err == nil && !strings.HasPrefix(rel, "..") {
			file = rel
		}
	}
	var b strings.Builder
	b.WriteString(filepath.ToSlash(file))
	if d.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Pos.Line)
		if d.Pos.Column > 0 {
			fmt.Fprintf(&b, ":%d", d.Pos.Column)
		}
	}
	b.WriteString(": ")
	if d.Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.Msg)
	return b.String()
}

// String returns d in the go vet form, with the file as recorded.
func (d Diagnostic) String() string { return d.Format("") }

// Diagnostics is a list of diagnostics; [Diagnostics.Sort] orders it by
// position and drops duplicates.
type Diagnostics []Diagnostic

func (l *Diagnostics) errorf(pos token.Position, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (l *Diagnostics) warnf(pos token.Position, format string, args ...any) {
	*l = append(*l, Diagnostic{Pos: pos, Msg: fmt.Sprintf(format, args...), Warning: true})
}

// Sort sorts l by file, line, column and message, and removes duplicates.
func (l *Diagnostics) Sort() {
	slices.SortFunc(*l, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Pos.Filename, b.Pos.Filename),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
			cmp.Compare(a.Msg, b.Msg),
		)
	})
	*l = slices.Compact(*l)
}

// HasErrors reports whether l holds anything but warnings.
func (l Diagnostics) HasErrors() bool {
	return slices.ContainsFunc(l, func(d Diagnostic) bool { return !d.Warning })
}

// Errors returns the diagnostics of l that are not warnings.
func (l Diagnostics) Errors() Diagnostics {
	return slices.DeleteFunc(slices.Clone(l), func(d Diagnostic) bool { return d.Warning })
}

// pos is the position of a whole file, for diagnostics about it.
func pos(file string) token.Position { return token.Position{Filename: file, Line: 1, Column: 1} }
