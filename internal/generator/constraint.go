package generator

import (
	"go/ast"
	"go/build"
	"go/build/constraint"
	"io"
	"path/filepath"
	"strings"
)

// fileConstraint returns the build constraint of the file f, named
// filename, as one expression, as the go command reads it: its //go:build
// line (or, in a file that has none, its // +build lines) before the blank
// line that precedes the package clause and its doc comment, and the GOOS
// and GOARCH that its name implies; nil if it has none.
func fileConstraint(f *ast.File, filename string) constraint.Expr {
	var goBuild, plusBuild []constraint.Expr
	for _, group := range f.Comments {
		if group.Pos() >= f.Package {
			break
		}
		if group == f.Doc {
			continue // no blank line before the package clause: the go command ignores it too
		}
		for _, c := range group.List {
			switch {
			case constraint.IsGoBuild(c.Text):
				if x, err := constraint.Parse(c.Text); err == nil {
					goBuild = append(goBuild, x)
				}
			case constraint.IsPlusBuild(c.Text):
				if x, err := constraint.Parse(c.Text); err == nil {
					plusBuild = append(plusBuild, x)
				}
			}
		}
	}
	exprs := goBuild
	if len(exprs) == 0 {
		exprs = plusBuild // the go command reads them only without //go:build
	}
	exprs = append(exprs, nameConstraint(filepath.Base(filename))...)
	var all constraint.Expr
	for _, x := range exprs {
		if all == nil {
			all = x
		} else {
			all = &constraint.AndExpr{X: all, Y: x}
		}
	}
	return all
}

// nameConstraint returns the tags that a Go file's name implies, as the go
// command reads them: name_GOOS.go, name_GOARCH.go, name_GOOS_GOARCH.go,
// each optionally followed by _test. The part before the first underscore
// never counts.
func nameConstraint(name string) []constraint.Expr {
	name = strings.TrimSuffix(name, ".go")
	i := strings.IndexByte(name, '_')
	if i < 0 {
		return nil
	}
	l := strings.Split(name[i+1:], "_")
	if n := len(l); n > 0 && l[n-1] == "test" {
		l = l[:n-1]
	}
	tag := func(s string) constraint.Expr { return &constraint.TagExpr{Tag: s} }
	switch n := len(l); {
	case n >= 2 && knownOS(l[n-2]) && knownArch(l[n-1]):
		return []constraint.Expr{tag(l[n-2]), tag(l[n-1])}
	case n >= 1 && (knownOS(l[n-1]) || knownArch(l[n-1])):
		return []constraint.Expr{tag(l[n-1])}
	}
	return nil
}

// knownOS and knownArch report whether the go command knows s as a GOOS
// or a GOARCH in file names. go/build keeps its lists to itself, so they ask
// it, with files of no content and a GOOS or GOARCH of "-", which is none:
// x_s_amd64.go is excluded for GOARCH amd64 if and only if s is a known
// GOOS, and x_s.go for neither if and only if s is a known GOOS or GOARCH.
func knownOS(s string) bool { return s != "" && !builds("x_"+s+"_amd64.go", "-", "amd64") }

func knownArch(s string) bool { return s != "" && !knownOS(s) && !builds("x_"+s+".go", "-", "-") }

// builds reports whether go/build builds an empty file named name for goos
// and goarch.
func builds(name, goos, goarch string) bool {
	ctxt := build.Context{
		GOOS: goos, GOARCH: goarch, Compiler: "gc",
		OpenFile: func(string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("package x\n")), nil },
	}
	ok, err := ctxt.MatchFile(".", name)
	return ok && err == nil
}
