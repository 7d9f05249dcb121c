package generator

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// The generator's cases live in the top-level testdata module (G4):
// testdata/success/NAME is a package whose simba_gen.go is the golden
// output; testdata/failure/NAME.txtar holds input files and, in its "want"
// file, the exact diagnostics; testdata/regenerate/NAME.txtar holds input
// files that generate without errors, with a previous output among them,
// and in its "want" file the warnings and the files written or removed. In
// a txtar, a file named NAME.crlf is written as NAME with CRLF line endings,
// as git with core.autocrlf checks files out. go test -update rewrites the
// golden files and the want files.
var update = flag.Bool("update", false, "rewrite the golden simba_gen.go files and the want files of the txtar cases")

func testdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// goldenTag is the build tag of the success case "tagged", whose
// annotated functions are in files that need it: the success cases are
// generated, vetted and tested with it, and vetted without it too.
const goldenTag = "simbagolden"

// TestGolden generates every success case, loaded once, and compares the
// output with the committed simba_gen.go. Since the committed file is read
// as empty while loading, this also checks that regenerating is
// idempotent.
func TestGolden(t *testing.T) {
	root := testdata(t)
	pkgs, err := Load(Config{Dir: root, Tags: []string{goldenTag}}, "./success/...")
	if err != nil {
		t.Fatal(err)
	}
	res := GeneratePackages(pkgs)
	cases, err := os.ReadDir(filepath.Join(root, "success"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no success cases")
	}
	for _, c := range cases {
		dir := filepath.Join(root, "success", c.Name())
		t.Run(c.Name(), func(t *testing.T) {
			for _, d := range res.Diagnostics {
				if within(d.Pos.Filename, dir) {
					t.Errorf("unexpected diagnostic: %s", d.Format(dir))
				}
			}
			golden := filepath.Join(dir, OutputName)
			var got []byte
			for _, ch := range res.Changes {
				if ch.Path == golden {
					got = ch.Content
				}
			}
			if got == nil {
				t.Fatalf("no output for %s", golden)
			}
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := lineDiff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got); go test -update rewrites it:\n%s", golden, diff)
			}
		})
	}
	// G3: the same model gives the same bytes.
	for _, m := range res.Models {
		a, err := Source(m)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Source(m)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two emissions of one model differ", m.Output)
		}
	}
}

// TestFailures extracts every failure case into a module of its own, loads
// them all at once, and compares each case's diagnostics with its want
// file, in the go vet form with paths relative to the case.
func TestFailures(t *testing.T) {
	root := testdata(t)
	files, err := filepath.Glob(filepath.Join(root, "failure", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no failure cases: %v", err)
	}
	mod := t.TempDir()
	archives := extractCases(t, mod, root, files)
	pkgs, err := Load(Config{Dir: mod}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	res := GeneratePackages(pkgs)
	if res.Diagnostics.HasErrors() && len(res.Changes) > 0 {
		t.Errorf("diagnostics have errors, yet %d changes were produced; want nothing written", len(res.Changes))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		ar := archives[name]
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(mod, name)
			var got strings.Builder
			for _, d := range res.Diagnostics {
				if within(d.Pos.Filename, dir) {
					fmt.Fprintln(&got, d.Format(dir))
				}
			}
			if got.Len() == 0 && !*update {
				t.Errorf("no diagnostics")
			}
			compareWant(t, file, ar, got.String())
		})
	}
}

// TestRegenerate extracts every regeneration case into a module of its
// own, loads them all at once, and compares each case's warnings and
// changes ("write FILE", "remove FILE") with its want file. It then makes
// the changes and checks that a second run finds nothing to change.
func TestRegenerate(t *testing.T) {
	root := testdata(t)
	files, err := filepath.Glob(filepath.Join(root, "regenerate", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no regeneration cases: %v", err)
	}
	mod := t.TempDir()
	archives := extractCases(t, mod, root, files)
	res, err := Generate(Config{Dir: mod}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Diagnostics.Errors() {
		t.Errorf("error (a failure case belongs in testdata/failure): %s", d.Format(mod))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(mod, name)
			var got strings.Builder
			for _, d := range res.Diagnostics {
				if within(d.Pos.Filename, dir) {
					fmt.Fprintln(&got, d.Format(dir))
				}
			}
			for _, c := range res.Stale() {
				if within(c.Path, dir) {
					verb := "write"
					if c.Content == nil {
						verb = "remove"
					}
					rel, _ := filepath.Rel(dir, c.Path)
					fmt.Fprintf(&got, "%s %s\n", verb, filepath.ToSlash(rel))
				}
			}
			compareWant(t, file, archives[name], got.String())
		})
	}
	if err := res.Write(); err != nil {
		t.Fatal(err)
	}
	again, err := Generate(Config{Dir: mod}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again.Stale() {
		t.Errorf("after writing the changes, a second run would change %s again", c.Path)
	}
}

// extractCases writes the files of every txtar case into mod/NAME, for
// the case NAME.txtar, and makes mod a module that requires this one from
// source. It returns the archives by case name.
func extractCases(t *testing.T, mod, testdata string, files []string) map[string]*txtar.Archive {
	t.Helper()
	writeModule(t, mod, testdata)
	archives := make(map[string]*txtar.Archive)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		archives[name] = ar
		for _, f := range ar.Files {
			if f.Name == "want" {
				continue
			}
			data := f.Data
			if base, ok := strings.CutSuffix(f.Name, ".crlf"); ok {
				f.Name, data = base, bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
			}
			path := filepath.Join(mod, name, filepath.FromSlash(f.Name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return archives
}

// compareWant compares got with the want file of the case ar, read from
// file, or with -update rewrites the want file with got.
func compareWant(t *testing.T, file string, ar *txtar.Archive, got string) {
	t.Helper()
	i := slices.IndexFunc(ar.Files, func(f txtar.File) bool { return f.Name == "want" })
	if i < 0 {
		t.Fatalf("%s has no want file", file)
	}
	if *update {
		ar.Files[i].Data = []byte(got)
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := lineDiff(string(ar.Files[i].Data), got); diff != "" {
		t.Errorf("(-want +got); go test -update rewrites the want file:\n%s", diff)
	}
}

// caseGoMod returns the go.mod of a module named name that requires this
// one, at repo, with the requirements of the testdata module (those of this
// module's packages, which Go wants listed).
func caseGoMod(t testing.TB, testdata, name, repo string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.Replace(string(b), "module github.com/simba-go/simba/testdata", "module "+name, 1)
	return strings.Replace(mod, "replace github.com/simba-go/simba => ../", "replace github.com/simba-go/simba => "+repo, 1)
}

// writeModule makes dir a module that requires this one, from its source.
func writeModule(t *testing.T, dir, testdata string) {
	t.Helper()
	repo := filepath.Dir(testdata)
	gomod := caseGoMod(t, testdata, "example.test/cases", repo)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(testdata, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenPackagesRun vets the testdata module and runs its tests, with
// the race detector, which register the generated code of the success
// cases with a client on the memory backend and watch it run (G4:
// goldens are compiled and run). Every success case has a test; each
// benchmark runs once, as the generated code of the bench case is run
// only there. The module is vetted without goldenTag too: the build that
// excludes the tagged case's annotated functions must exclude its
// generated file as well.
func TestGoldenPackagesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the testdata module")
	}
	root := testdata(t)
	cases, err := os.ReadDir(filepath.Join(root, "success"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		tests, _ := filepath.Glob(filepath.Join(root, "success", c.Name(), "*_test.go"))
		if len(tests) == 0 {
			t.Errorf("testdata/success/%s has no test: its generated code is compiled but never run", c.Name())
		}
	}
	tags := "-tags=" + goldenTag
	for _, args := range [][]string{{"vet", "./..."}, {"vet", tags, "./..."}, {"test", tags, "-race", "-count=1", "-bench=.", "-benchtime=1x", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s in testdata: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func within(file, dir string) bool {
	rel, err := filepath.Rel(dir, file)
	return err == nil && !strings.HasPrefix(rel, "..")
}

// lineDiff returns a line diff of want and got, "" if they are equal: the
// lines of each that are not in their longest common subsequence, marked
// - and +.
func lineDiff(want, got string) string {
	if want == got {
		return ""
	}
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "+%s\n", b[j])
			j++
		default:
			fmt.Fprintf(&out, "-%s\n", a[i])
			i++
		}
	}
	return out.String()
}
