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

// The generator's cases live in the top-level testdata module (SPEC G4):
// testdata/success/NAME is a package whose simba_gen.go is the golden
// output, and testdata/failure/NAME.txtar holds input files and, in its
// "want" file, the exact diagnostics. go test -update rewrites both.
var update = flag.Bool("update", false, "rewrite the golden simba_gen.go files and the want files of the txtar cases")

func testdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGolden generates every success case, loaded once, and compares the
// output with the committed simba_gen.go. Since the committed file is read
// as empty while loading, this also checks that regenerating is
// idempotent.
func TestGolden(t *testing.T) {
	root := testdata(t)
	pkgs, err := Load(Config{Dir: root}, "./success/...")
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
		a, err := Format(Emit(m), m.Output)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Format(Emit(m), m.Output)
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
	writeModule(t, mod, root)
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
			path := filepath.Join(mod, name, filepath.FromSlash(f.Name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
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
			i := slices.IndexFunc(ar.Files, func(f txtar.File) bool { return f.Name == "want" })
			if i < 0 {
				t.Fatalf("%s has no want file", file)
			}
			if *update {
				ar.Files[i].Data = []byte(got.String())
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got.Len() == 0 {
				t.Errorf("no diagnostics")
			}
			if diff := lineDiff(string(ar.Files[i].Data), got.String()); diff != "" {
				t.Errorf("diagnostics (-want +got); go test -update rewrites the want file:\n%s", diff)
			}
		})
	}
}

// writeModule makes dir a module that requires this one, from its source.
func writeModule(t *testing.T, dir, testdata string) {
	t.Helper()
	repo := filepath.Dir(testdata)
	gomod := fmt.Sprintf("module example.test/cases\n\ngo 1.26.0\n\nrequire github.com/simba-go/simba v0.0.0\n\nreplace github.com/simba-go/simba => %s\n", repo)
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
// cases with a client on the memory backend and watch it run (SPEC G4:
// goldens are compiled and run). Every success case has a test; each
// benchmark runs once, as the generated code of the bench case is run
// only there.
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
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-race", "-count=1", "-bench=.", "-benchtime=1x", "./..."}} {
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
