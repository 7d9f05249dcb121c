package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The core's contract (doc.go): no goroutines, no clock, no timers, no
// randomness but the seed, nothing that shares memory or does I/O. This
// parses the package's own files, those of the vocabulary it shares with
// the runtime (runtime/internal/vocab) and those of the schedule record it
// reads and writes (internal/schedulerecord), and fails on any of them, so
// the contract cannot erode one convenient call at a time.
func TestPurity(t *testing.T) {
	for _, pkg := range []struct {
		name, dir string
		minFiles  int
	}{{"engine", ".", 10}, {"vocab", "../vocab", 5}, {"schedulerecord", "../../../internal/schedulerecord", 1}} {
		t.Run(pkg.name, func(t *testing.T) { checkPure(t, pkg.dir, pkg.minFiles) })
	}
}

// checkPure parses the non-test files of dir, at least minFiles of them,
// and reports every break of the contract.
func checkPure(t *testing.T, dir string, minFiles int) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, f)
		}
	}
	forbiddenImports := map[string]bool{"sync": true, "sync/atomic": true, "context": true, "crypto/rand": true,
		"os": true, "net": true, "math/rand": true, "unsafe": true, "runtime": true, "io": true, "log": true,
		"log/slog": true, "reflect": true}
	forbiddenTime := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "NewTimer": true,
		"After": true, "AfterFunc": true, "Tick": true, "NewTicker": true}
	allowedRand := map[string]bool{"New": true, "NewPCG": true, "Rand": true}
	files := 0
	for _, f := range parsed {
		files++
		local := map[string]string{} // import name → path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImports[path] || strings.HasPrefix(path, "os/") || strings.HasPrefix(path, "net/") {
				t.Errorf("%s: imports %q", fset.Position(imp.Pos()), path)
			}
			short := path[strings.LastIndex(path, "/")+1:]
			if path == "math/rand/v2" {
				short = "rand"
			}
			if imp.Name != nil {
				short = imp.Name.Name
			}
			local[short] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement", fset.Position(n.Pos()))
			case *ast.ChanType:
				t.Errorf("%s: a channel", fset.Position(n.Pos()))
			case *ast.SelectStmt:
				t.Errorf("%s: a select statement", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				id, ok := n.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch local[id.Name] {
				case "time":
					if forbiddenTime[n.Sel.Name] {
						t.Errorf("%s: time.%s", fset.Position(n.Pos()), n.Sel.Name)
					}
				case "math/rand/v2":
					if !allowedRand[n.Sel.Name] {
						t.Errorf("%s: rand.%s (randomness comes only from the seed given to New)", fset.Position(n.Pos()), n.Sel.Name)
					}
				}
			}
			return true
		})
	}
	if files < minFiles {
		t.Fatalf("parsed %d files in %s; the package has more", files, dir)
	}
}
