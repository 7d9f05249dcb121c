package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/simba-go/simba/internal/generator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is simbagen without the process: it returns the exit status, 0 when
// all is well, 1 for diagnostics or stale output, 2 for a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simbagen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "write nothing; exit 1 if a generated file is missing, stale or should be removed")
	tags := fs.String("tags", "", "comma-separated build tags to load the packages with")
	verbose := fs.Bool("v", false, "print each file written or removed")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: simbagen [-check] [-tags list] [-v] [packages]\n\n")
		fmt.Fprintf(stderr, "simbagen writes simba_gen.go in each package with //simba: directives.\n")
		fmt.Fprintf(stderr, "The packages default to the one in the current directory.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "simbagen:", err)
		return 1
	}
	cfg := generator.Config{}
	if *tags != "" {
		cfg.Tags = strings.Split(*tags, ",")
	}
	res, err := generator.Generate(cfg, fs.Args()...)
	if err != nil {
		fmt.Fprintln(stderr, "simbagen:", err)
		return 1
	}
	for _, d := range res.Diagnostics {
		fmt.Fprintln(stderr, d.Format(cwd))
	}
	if res.Diagnostics.HasErrors() {
		return 1
	}
	stale := res.Stale()
	if *check {
		for _, c := range stale {
			what := "is out of date"
			switch {
			case c.Content == nil:
				what = "should be removed: its package has no //simba: directives"
			case !exists(c.Path):
				what = "is missing"
			}
			fmt.Fprintf(stderr, "%s %s; run go generate\n", rel(cwd, c.Path), what)
		}
		if len(stale) > 0 {
			return 1
		}
		return 0
	}
	if err := res.Write(); err != nil {
		fmt.Fprintln(stderr, "simbagen:", err)
		return 1
	}
	if *verbose {
		for _, c := range stale {
			verb := "wrote"
			if c.Content == nil {
				verb = "removed"
			}
			fmt.Fprintln(stdout, verb, rel(cwd, c.Path))
		}
	}
	return 0
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func rel(base, path string) string {
	if r, err := filepath.Rel(base, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
