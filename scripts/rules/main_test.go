package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, root, name, text string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write(t, root, designDoc, "# Design\n\n## 1. Sessions\n\n### S1\n\ntext\n\n### H1\n")
	write(t, root, "good/doc.go", "// Package good does (S1). Rule names refer to docs/design.md.\npackage good\n")
	write(t, root, "good/more.go", "package good\n\n// f hands over (H1), see §1.\nfunc f() {}\n")
	write(t, root, "bad/doc.go", "// Package bad cites (S1, S7) and §4 with no pointer.\npackage bad\n")
	write(t, root, "quiet/doc.go", "// Package quiet cites nothing; a name outside parentheses, such as S3, is prose.\npackage quiet\n")
	write(t, root, "bad/x_test.go", "package bad\n\n// (Q9) tests are not read.\n")
	write(t, root, "testdata/t.go", "// (S9) testdata is not read.\npackage t\n")

	rules, sections, err := declared(filepath.Join(root, designDoc))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := check(root, rules, sections)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.file+": "+p.msg)
	}
	want := []string{
		"bad/doc.go: rule S7 is not declared in docs/design.md",
		"bad/doc.go: section §4 is not a numbered section of docs/design.md",
		"bad/doc.go: package bad cites rule names but none of its files says they refer to docs/design.md",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDeclaredNeedsRules(t *testing.T) {
	root := t.TempDir()
	write(t, root, designDoc, "# nothing here\n")
	if _, _, err := declared(filepath.Join(root, designDoc)); err == nil || !strings.Contains(err.Error(), "declares no rule") {
		t.Fatalf("declared = %v; want an error saying the document declares no rule", err)
	}
}
