// Command layers measures how a package's files depend on each other: for
// each non-test file, the other files whose top-level declarations it
// references (package-level names, methods, and fields of package-level
// types). Given the files in layers, top-down — the API first, the leaves
// last — it counts the references that run back up, from a file to one
// above it, and lists them. It is a development tool: the count is how the
// runtime's file plan is kept honest (a reference back up is a cycle
// between files, or a leaf that is not one).
//
// Usage, from the module's root:
//
//	go run ./scripts/layers [-v] -order a.go,b.go,... ./runtime
//
// -v lists every reference between files, not only those back up. Every
// non-test file of the package must be in -order. The runtime's layers:
//
//	go run ./scripts/layers -order generated.go,election.go,handover.go,semaphore.go,lock.go,group.go,schedule.go,holder.go,snapshot.go,recovering.go,client.go,handle.go,inputs.go,locks.go,loop.go,calls.go,tasks.go,events.go,driver.go,notes.go,callctx.go,dispatch.go,listener.go,term.go,observer.go,configenv.go,config.go,bounds.go,misuse.go,errors.go,vocab.go,doc.go ./runtime
//
// It exits 1 when a file is missing from -order, 2 on a usage or load error.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	order := flag.String("order", "", "the package's non-test files, comma-separated, top layer first")
	verbose := flag.Bool("v", false, "list every reference between files, not only those back up")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/layers [-v] -order a.go,b.go,... dir")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *order == "" {
		flag.Usage()
		os.Exit(2)
	}
	refs, files, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers:", err)
		os.Exit(2)
	}
	rank := map[string]int{}
	for i, name := range strings.Split(*order, ",") {
		rank[strings.TrimSpace(name)] = i + 1
	}
	missing := false
	for _, f := range files {
		if rank[f] == 0 {
			fmt.Fprintf(os.Stderr, "layers: %s is not in -order\n", f)
			missing = true
		}
	}
	if missing {
		os.Exit(1)
	}
	pairs := make([][2]string, 0, len(refs))
	for p := range refs {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		a, b := pairs[i], pairs[j]
		if rank[a[0]] != rank[b[0]] {
			return rank[a[0]] < rank[b[0]]
		}
		return rank[a[1]] < rank[b[1]]
	})
	up := 0
	for _, p := range pairs {
		back := rank[p[1]] < rank[p[0]]
		if back {
			up++
		}
		if back || *verbose {
			mark := ""
			if back {
				mark = "  back up"
			}
			fmt.Printf("%-14s -> %-14s %3d uses%s\n", p[0], p[1], refs[p], mark)
		}
	}
	fmt.Printf("%d files, %d references between files, %d back up\n", len(files), len(pairs), up)
}

// load type-checks the package in dir (its non-test files) and returns,
// for each ordered pair of its files, how many uses in the first refer to
// a top-level declaration of the second; and the files' names.
func load(dir string) (map[[2]string]int, []string, error) {
	fset := token.NewFileSet()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	var files []*ast.File
	var names []string
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
		names = append(names, filepath.Base(m))
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s: no Go files", dir)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		return nil, nil, err
	}
	fileOf := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	refs := map[[2]string]int{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		topLevel := obj.Parent() == pkg.Scope()
		switch o := obj.(type) {
		case *types.Func:
			topLevel = topLevel || o.Signature().Recv() != nil
		case *types.Var:
			topLevel = topLevel || o.IsField()
		}
		if from, to := fileOf(id.Pos()), fileOf(obj.Pos()); topLevel && from != to {
			refs[[2]string{from, to}]++
		}
	}
	return refs, names, nil
}
