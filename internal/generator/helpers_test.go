package generator

import (
	"fmt"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"
)

func TestDiagnosticsSortAndFormat(t *testing.T) {
	at := func(file string, line, col int) token.Position {
		return token.Position{Filename: file, Line: line, Column: col}
	}
	l := Diagnostics{
		{Pos: at("/m/b.go", 1, 1), Msg: "b"},
		{Pos: at("/m/a.go", 3, 9), Msg: "z"},
		{Pos: at("/m/a.go", 3, 2), Msg: "y", Warning: true},
		{Pos: at("/m/b.go", 1, 1), Msg: "b"},
		{Pos: at("/elsewhere/c.go", 2, 0), Msg: "c"},
	}
	l.Sort()
	var got []string
	for _, d := range l {
		got = append(got, d.Format("/m"))
	}
	want := []string{
		"/elsewhere/c.go:2: c",
		"a.go:3:2: warning: y",
		"a.go:3:9: z",
		"b.go:1:1: b",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !l.HasErrors() || len(l.Errors()) != 3 {
		t.Errorf("HasErrors %v, Errors %d; want true, 3", l.HasErrors(), len(l.Errors()))
	}
}

func TestParsePos(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/m/a.go:3:9", "/m/a.go:3:9"},
		{"a.go:3", "/m/a.go:3"},
		{"-", "/m"},
		{"", "/m"},
	} {
		if got := parsePos(tt.in, "/m").String(); got != tt.want {
			t.Errorf("parsePos(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestDurations(t *testing.T) {
	for _, tt := range []struct {
		d           time.Duration
		code, human string
	}{
		{5 * time.Minute, "5 * time.Minute", "5m"},
		{time.Second, "time.Second", "1s"},
		{90 * time.Second, "90 * time.Second", "1m30s"},
		{1500 * time.Millisecond, "1500 * time.Millisecond", "1.5s"},
		{time.Hour, "time.Hour", "1h"},
		{90 * time.Minute, "90 * time.Minute", "1h30m"},
		{time.Hour + time.Nanosecond, "3600000000001 * time.Nanosecond", "1h0m0.000000001s"},
	} {
		if got := fmt.Sprintf("%#v", durationCode(tt.d)); got != tt.code {
			t.Errorf("durationCode(%v) = %s; want %s", tt.d, got, tt.code)
		}
		if got := human(tt.d); got != tt.human {
			t.Errorf("human(%v) = %s; want %s", tt.d, got, tt.human)
		}
	}
}

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"Service": "service", "HTTPServer": "httpServer", "ID": "id", "C": "c",
		"service": "service", "URLs": "urLs", "Élan": "élan",
	} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc dddddddd e", 8)
	want := []string{"aaa bbb", "ccc", "dddddddd", "e"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrap = %q; want %q", got, want)
	}
}

// A pattern that matches nothing is reported, not ignored.
func TestLoadNoPackage(t *testing.T) {
	res, err := Generate(Config{Dir: testdata(t)}, "./nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Diagnostics.HasErrors() {
		t.Errorf("no error for a pattern matching nothing: %v", res.Diagnostics)
	}
}

func TestNameConstraint(t *testing.T) {
	for name, want := range map[string]string{
		"a.go":               "",
		"linux.go":           "", // the part before the first underscore never counts
		"a_linux.go":         "linux",
		"a_b_linux.go":       "linux",
		"a_amd64.go":         "amd64",
		"a_linux_amd64.go":   "linux amd64",
		"a_amd64_linux.go":   "linux",
		"a_windows_test.go":  "windows",
		"a_test.go":          "",
		"a_unix.go":          "", // unix is a build tag, not a file-name suffix
		"a_android_arm64.go": "android arm64",
		"a_nope.go":          "",
	} {
		var got []string
		for _, x := range nameConstraint(name) {
			got = append(got, x.String())
		}
		if strings.Join(got, " ") != want {
			t.Errorf("nameConstraint(%q) = %q; want %q", name, got, want)
		}
	}
}

func TestFileConstraint(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"a.go", "package p\n", ""},
		{"a.go", "//go:build pro\n\npackage p\n", "pro"},
		{"a_linux.go", "//go:build pro || enterprise\n\npackage p\n", "(pro || enterprise) && linux"},
		{"a_linux_arm64.go", "package p\n", "linux && arm64"},
		{"a.go", "// +build pro\n// +build !windows\n\npackage p\n", "pro && !windows"},
		{"a.go", "//go:build pro\n// +build enterprise\n\npackage p\n", "pro"}, // //go:build wins
		{"a.go", "// Package p.\n//go:build pro\npackage p\n", ""},             // in the doc comment: not a constraint
		{"a.go", "package p\n\n//go:build pro\n", ""},                          // after the package clause
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, tt.name, tt.src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if x := fileConstraint(f, tt.name); x != nil {
			got = x.String()
		}
		if got != tt.want {
			t.Errorf("fileConstraint(%s, %q) = %q; want %q", tt.name, tt.src, got, tt.want)
		}
	}
}
