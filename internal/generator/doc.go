// Package generator is simbagen's library (§14): it turns the //simba:
// directives of Go packages into simba_gen.go files. cmd/simbagen, which
// users run from a //go:generate go tool simbagen line, is a thin front end
// over it.
//
// Rule names such as F1 or §12 refer to docs/design.md in the repository.
//
// Each stage is a function of its own, so that tests and tools can look at
// what it produced:
//
//   - [Load] loads the packages with go/packages (names, files, syntax and
//     types; dependencies from export data), reading any previous
//     simba_gen.go as an empty file so that stale output never prevents
//     regeneration (G3). The package's _test.go files, and the files that
//     the build constraints exclude, are only parsed, for their comments.
//   - [Extract] finds the directives in the raw comment text and parses them
//     with package annotations (G1, G4); [ExtractIgnored] warns about those
//     in test files and in files the build constraints exclude, which
//     generate nothing.
//   - [Check] checks each annotated function's signature with go/types
//     (G1, G2) and builds the [Model]: one [Task] per function, with its
//     registration name, receiver and typed-steps source.
//   - [Emit] builds the file with jennifer (G3); [Format] renders it,
//     gofmt-clean, with the imports grouped; [Source] does both and puts
//     the model's build constraint in the file.
//   - [Result.Write] writes every file, each through a temporary file and a
//     rename, and only if no stage reported an error.
//
// [Generate] runs them all. Problems in the input are [Diagnostics], all of
// them from one run, sorted by position, in the go vet form
// file:line:col: message.
package generator
