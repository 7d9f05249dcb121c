// Simbagen writes the registration code for functions annotated with
// //simba:scheduled and //simba:partitioned (§14).
//
// Rule names such as G1 or E1, and sections such as §14, refer to
// docs/design.md in the repository.
//
// Make simbagen a tool of your module, once (Go 1.24 or later records it
// on a tool line in go.mod, with the module at the version it resolves):
//
//	go get -tool github.com/simba-go/simba/cmd/simbagen
//
// Then put a go:generate line in each package with directives, and a
// directive directly above a top-level function or method:
//
//	//go:generate go tool simbagen
//
//	//simba:scheduled lease=report rate=5m step=2s
//	func Report(ctx context.Context, t *runtime.Term) error { … }
//
//	//simba:partitioned group=billing partitions=16 delay=30s step=1s
//	func (s *Service) Settle(ctx context.Context, t *runtime.Term, partition int) error { … }
//
//	//simba:scheduled lease=ledger rate=1m step=2s items=PendingBatches
//	func (l *Ledger) Write(ctx context.Context, t *runtime.Term, b Batch) error { … }
//	func (l *Ledger) PendingBatches(ctx context.Context, t *runtime.Term) iter.Seq2[Batch, error] { … }
//
// and run go generate ./... (or go tool simbagen ./..., which does the
// same). In each package with directives simbagen writes simba_gen.go,
// which declares, for every annotated function, a documented
// RegisterReport(c *runtime.Client) or, for a method,
// RegisterServiceSettle(c *runtime.Client, service *Service), returning a
// runtime.Registration; and RegisterAll, which registers them all on a
// client without blocking and stops what it started if one fails. The file
// imports the runtime as simbart, refers to simbart.SupportPackageIsVersion1
// and holds a signature guard per function, so that stale output fails to
// compile at once. Its names read as hand-written ones: c for the client,
// service for a *Service; where a name of the package is in the way, the
// next a person would pick (client, the receiver's name in the method,
// stdtime for package time), never a number unless all of those are taken.
//
// The directive grammar, with every key, is documented in package
// github.com/simba-go/simba/annotations. The signatures allowed are:
//
//	//simba:scheduled                func(ctx context.Context, t *runtime.Term) error
//	//simba:partitioned              func(ctx context.Context, t *runtime.Term, partition int) error
//	with items=Source, one item more func(ctx context.Context, t *runtime.Term[, partition int], item T) error
//	and Source, a function or a      func(ctx context.Context, t *runtime.Term[, partition int]) iter.Seq2[T, error]
//	method of the same receiver      func(ctx context.Context, t *runtime.Term[, partition int]) ([]T, error)
//
// With items=, the generated wrapper calls Source once per run, and before
// each item checks that the term stays valid for more than step
// (Term.EnsureValid, E1); an item's error or a failed check ends the
// run.
//
// # Usage
//
//	go tool simbagen [-check] [-tags list] [-v] [packages]
//
// go tool builds simbagen from the version of this module that your go.mod
// requires, so the generator and the runtime it generates calls for always
// match. A module that requires this one only for the runtime has no go.sum
// entries for the generator's own dependencies, which is why
// go run github.com/simba-go/simba/cmd/simbagen fails there ("missing go.sum
// entry"); go get -tool records them.
//
// The packages are go list patterns and default to the package in the
// current directory. simbagen reports every problem it finds, in the go vet
// form file:line:col: message, and writes nothing unless there is none: an
// invalid directive, a directive anywhere but directly above a top-level
// function, a directive on a function or method named _ (which no code can
// refer to), a function with two directives, a lease or group used twice in a
// package, a signature that does not fit, a missing items= source, or a
// generated name that the package already declares. A directive misspelt as
// "// simba:" (with a space) is only a warning: Go reads it as an ordinary
// comment.
//
// simbagen generates code only for a package's non-test files: it does not
// load the package's _test.go files (in-package or external tests). A
// directive in one of them, or a near miss, is ignored with a warning,
// "directive in a _test.go file is ignored", which leaves the exit status
// as it is. Move the function to a non-test file to have it registered.
//
// simbagen reads a package's previous simba_gen.go as empty, so a stale
// one never stands in the way; it removes the file when the last directive
// is gone, and refuses to overwrite a simba_gen.go it did not write. One
// that git checked out with CRLF line endings (core.autocrlf) is still its
// own: it counts as stale, and go generate rewrites it with LF, as gofmt
// would.
//
// The flags are:
//
//	-check  write nothing; exit 1 if a generated file is missing, stale or
//	        should be removed (for CI)
//	-tags   comma-separated build tags to load the packages with, as
//	        go build -tags
//	-v      print each file written or removed
//
// Exit status: 0 when all is well, 1 for errors in the input or (with
// -check) stale output, 2 for a usage error.
//
// # Build constraints
//
// simbagen loads the files of the build that -tags, GOOS and GOARCH select,
// as go build would. A directive in a file that this build excludes is
// ignored with a warning, "directive in a file that the build constraints
// exclude is ignored". When the annotated functions are in files with a
// build constraint (a //go:build line, or a _GOOS or _GOARCH file-name
// suffix), simba_gen.go carries the same constraint on a //go:build line of
// its own, so that the builds without the tag still compile. As the one
// generated file of a package can carry one constraint, every annotated
// function of a package must be in files under the same one, or in files
// without: a package that mixes them is refused. For a tag of your own, put
// the go:generate line in a file under the same tag and pass it on:
//
//	//go:build pro
//
//	//go:generate go tool simbagen -tags pro
//
// and run go generate -tags pro ./.... A run without the tag leaves a
// simba_gen.go that the build excludes alone, and refuses to replace it
// if the package has directives in the files that the build includes.
package main
