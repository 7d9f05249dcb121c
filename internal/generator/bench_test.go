package generator

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkGenerate200 runs the generator on one package with 200
// annotated functions (issue 5: under 2s, most of it loading), and reports
// the split: load-ms for go/packages, rest-ms for extract, check, emit and
// format.
func BenchmarkGenerate200(b *testing.B) {
	_, dir := bigModule(b)
	var load, rest time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		pkgs, err := Load(Config{Dir: dir}, "./big")
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res := GeneratePackages(pkgs)
		rest += time.Since(t1)
		load += t1.Sub(t0)
		if res.Diagnostics.HasErrors() || len(res.Changes) != 1 || len(res.Models[0].Tasks) != 200 {
			b.Fatalf("diagnostics %v, %d changes", res.Diagnostics, len(res.Changes))
		}
	}
	b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "load-ms")
	b.ReportMetric(float64(rest.Milliseconds())/float64(b.N), "rest-ms")
}

// BenchmarkSimbagen200 runs the simbagen command, built once, on the same
// package, as go generate would (with -check, so that every run does the
// same work), and reports its wall time and peak resident memory.
func BenchmarkSimbagen200(b *testing.B) {
	root, dir := bigModule(b)
	bin := filepath.Join(b.TempDir(), "simbagen")
	build := exec.Command("go", "build", "-o", bin, "./cmd/simbagen")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/simbagen: %v\n%s", err, out)
	}
	var wall time.Duration
	var peak int64
	for b.Loop() {
		cmd := exec.Command(bin, "-check", "./big")
		cmd.Dir = dir
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		wall += time.Since(t0)
		// -check exits 1: the package has no simba_gen.go yet, so it is "missing".
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "simba_gen.go") {
			b.Fatalf("simbagen -check: exit %d (%v); want 1, naming the missing file:\n%s", code, err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss) // kilobytes on Linux
		}
	}
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MB")
}

// bigModule writes a module with one package, big, of 200 annotated
// functions, that uses this repository's simba; it returns the
// repository's root and the module's directory.
func bigModule(b *testing.B) (root, dir string) {
	dir = b.TempDir()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	gomod := caseGoMod(b, filepath.Join(root, "testdata"), "example.test/big", root)
	sum, err := os.ReadFile(filepath.Join(root, "testdata", "go.sum"))
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{"go.mod": gomod, "go.sum": string(sum), "big/big.go": bigPackage(200)}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root, dir
}

// bigPackage returns a package with n annotated functions: a quarter each
// of scheduled functions, scheduled methods, partitioned methods and typed
// steps.
func bigPackage(n int) string {
	var b strings.Builder
	b.WriteString(`package big

import (
	"context"
	"iter"

	"github.com/simba-go/simba/runtime"
)

type Service struct{}

type Item struct{ ID int }

func Items(ctx context.Context, t *runtime.Term) iter.Seq2[Item, error] { return nil }
`)
	for i := range n {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "\n//simba:scheduled lease=f%d rate=1m step=1s\nfunc F%d(ctx context.Context, t *runtime.Term) error { return nil }\n", i, i)
		case 1:
			fmt.Fprintf(&b, "\n//simba:scheduled lease=m%d delay=30s\nfunc (s *Service) M%d(ctx context.Context, t *runtime.Term) error { return nil }\n", i, i)
		case 2:
			fmt.Fprintf(&b, "\n//simba:partitioned group=p%d partitions=16 rate=10s\nfunc (s *Service) P%d(ctx context.Context, t *runtime.Term, partition int) error { return nil }\n", i, i)
		case 3:
			fmt.Fprintf(&b, "\n//simba:scheduled lease=t%d rate=1m step=2s items=Items\nfunc T%d(ctx context.Context, t *runtime.Term, item Item) error { return nil }\n", i, i)
		}
	}
	return b.String()
}
