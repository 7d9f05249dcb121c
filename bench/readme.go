package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
)

// The markers of the region of bench/README.md that `make compare`
// rewrites: the text between them is the last full run's table.
const (
	readmeBegin = "<!-- compare:begin"
	readmeEnd   = "<!-- compare:end -->"
)

// WriteReadme replaces the region between the compare markers of the
// Markdown file at path with a line saying when and where the run was
// made, and table. It leaves the file as it was if the markers are
// missing.
func WriteReadme(path string, table []byte, when time.Time) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := replaceRegion(doc, table, when)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

func replaceRegion(doc, table []byte, when time.Time) ([]byte, error) {
	b := bytes.Index(doc, []byte(readmeBegin))
	if b < 0 {
		return nil, errors.New("no " + readmeBegin + " marker")
	}
	nl := bytes.IndexByte(doc[b:], '\n')
	e := bytes.Index(doc, []byte(readmeEnd))
	if nl < 0 || e < b+nl {
		return nil, errors.New("no " + readmeEnd + " marker after " + readmeBegin)
	}
	var out bytes.Buffer
	out.Write(doc[:b+nl+1])
	fmt.Fprintf(&out, "Measured on %s, %d CPUs (%s/%s, %s), %s:\n\n", hostKind(), runtime.NumCPU(), runtime.GOOS,
		runtime.GOARCH, runtime.Version(), when.UTC().Format("2006-01-02"))
	out.Write(table)
	out.Write(doc[e:])
	return out.Bytes(), nil
}

// hostKind names the machine for the table's heading: its OS's pretty
// name where /etc/os-release gives one.
func hostKind() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "this machine"
	}
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("PRETTY_NAME=")); ok {
			return string(bytes.Trim(v, `"`))
		}
	}
	return "this machine"
}
