package generator

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
	"golang.org/x/tools/imports"
)

// Format renders f and formats it as gofmt does, with the imports grouped
// as goimports groups them (the standard library first).
func Format(f *jen.File, filename string) ([]byte, error) {
	return render(f, filename, "")
}

// Source returns the content of m's generated file: [Emit] rendered by
// [Format], with a //go:build line for m.Constraint, if any, below the
// header.
func Source(m *Model) ([]byte, error) {
	return render(Emit(m), m.Output, m.Constraint)
}

func render(f *jen.File, filename, buildExpr string) ([]byte, error) {
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, fmt.Errorf("simbagen: rendering %s: %w", filename, err)
	}
	src := buf.Bytes()
	if buildExpr != "" {
		header := []byte(Header + "\n")
		if !bytes.HasPrefix(src, header) {
			return nil, fmt.Errorf("simbagen: rendering %s: it does not start with the header", filename)
		}
		src = slices.Concat(header, []byte("\n//go:build "+buildExpr+"\n"), src[len(header):])
	}
	out, err := imports.Process(filename, src, &imports.Options{
		FormatOnly: true, Comments: true, TabIndent: true, TabWidth: 8,
	})
	if err != nil {
		return nil, fmt.Errorf("simbagen: formatting %s: %w", filename, err)
	}
	return out, nil
}

// Change is what generation does to one file.
type Change struct {
	Path    string // absolute
	Content []byte // nil: remove the file
	// Stale reports whether the file on disk differs from Content (or
	// exists, when Content is nil).
	Stale bool
}

// Result is the outcome of [Generate].
type Result struct {
	// Diagnostics are every error and warning, sorted. If any is an
	// error, Changes is empty: nothing is written.
	Diagnostics Diagnostics
	// Changes are the files to write or remove, by path; unchanged files
	// are included, with Stale false.
	Changes []Change
	// Models are the packages' models, for inspection; a package without
	// directives has none.
	Models []*Model
}

// Stale returns the changes that would change a file on disk.
func (r *Result) Stale() []Change {
	return slices.DeleteFunc(slices.Clone(r.Changes), func(c Change) bool { return !c.Stale })
}

// Generate runs every stage on the packages matching patterns: load,
// extract, check, model, emit and format. It writes nothing: see
// [Result.Write]. The error is for a failure to load at all.
func Generate(cfg Config, patterns ...string) (*Result, error) {
	pkgs, err := Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	return GeneratePackages(pkgs), nil
}

// GeneratePackages runs the stages after Load on pkgs.
func GeneratePackages(pkgs []*Package) *Result {
	res := &Result{}
	models := make([]*Model, len(pkgs))
	exports := make(map[string][]string) // package path → generated names
	for i, p := range pkgs {
		res.Diagnostics = append(res.Diagnostics, ExtractIgnored(p)...)
		if p.Types == nil || len(p.Files) == 0 {
			res.Diagnostics = append(res.Diagnostics, p.loadErrors...)
			continue
		}
		found, diags := Extract(p)
		res.Diagnostics = append(res.Diagnostics, diags...)
		exports[p.Path] = generatedNames(p, found)
		m, diags := Check(p, found)
		res.Diagnostics = append(res.Diagnostics, diags...)
		models[i] = m
		if m != nil {
			res.Models = append(res.Models, m)
		}
	}
	for i, p := range pkgs {
		if models[i] == nil && !hasDirectiveErrors(res.Diagnostics, p) {
			continue // nothing to generate: its own errors are none of ours
		}
		res.Diagnostics = append(res.Diagnostics, p.loadErrors...)
		res.Diagnostics = append(res.Diagnostics, typeErrors(p, exports)...)
		switch {
		case models[i] == nil:
		case p.Foreign:
			res.Diagnostics.errorf(pos(p.Output), "%s was not written by simbagen (its first line is not %q); rename it, or delete it to let simbagen write its own",
				OutputName, Header)
		case p.OutputExcluded:
			constraint := "its build constraint"
			if p.OutputConstraint != "" {
				constraint = fmt.Sprintf("its build constraint %q", p.OutputConstraint)
			}
			res.Diagnostics.errorf(pos(p.Output), "%s is excluded from this build by %s: simbagen generated it for other build tags (or GOOS, GOARCH) and would replace it; run simbagen with those (-tags), or delete the file",
				OutputName, constraint)
		}
	}
	res.Diagnostics.Sort()
	if res.Diagnostics.HasErrors() {
		return res
	}
	for i, p := range pkgs {
		switch {
		case models[i] != nil:
			src, err := Source(models[i])
			if err != nil {
				// A bug of simbagen, not of the input: say so plainly.
				res.Diagnostics.errorf(pos(p.Output), "internal error: %v", err)
				continue
			}
			res.Changes = append(res.Changes, Change{Path: p.Output, Content: src, Stale: !bytes.Equal(src, p.Previous)})
		case p.Previous != nil:
			// Every directive is gone: so is the file (G3). An output that
			// the build excludes has no Previous: it is left alone.
			res.Changes = append(res.Changes, Change{Path: p.Output, Stale: true})
		}
	}
	slices.SortFunc(res.Changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	res.Diagnostics.Sort()
	return res
}

// hasDirectiveErrors reports whether diags has an error in p's files:
// a package whose only directives are invalid still needs its own errors
// checked.
func hasDirectiveErrors(diags Diagnostics, p *Package) bool {
	return slices.ContainsFunc(diags, func(d Diagnostic) bool {
		return !d.Warning && filepath.Dir(d.Pos.Filename) == p.Dir
	})
}

// generatedNames returns the names that p's generated file declares for
// the directives found, sorted: RegisterAll and one Register function per
// annotated function. Invalid directives count too: until they are fixed,
// nothing is generated, and a use of these names is undefined only for
// that reason (see [typeErrors]).
func generatedNames(p *Package, found []Found) []string {
	if len(found) == 0 {
		return nil
	}
	names := []string{"RegisterAll"}
	for _, f := range found {
		names = append(names, registerName(p, f.Decl))
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// typeErrors returns p's type errors but those the missing output causes:
// a use of a name that the generated file declares, in p (RegisterAll) or,
// qualified, in another package being generated (other.RegisterAll).
func typeErrors(p *Package, exports map[string][]string) Diagnostics {
	if len(p.typeErrors) == 0 {
		return nil
	}
	idents := make(map[int]*ast.Ident) // offset → identifier, per file below
	var diags Diagnostics
	var file *ast.File
	for _, te := range p.typeErrors {
		position := te.Fset.Position(te.Pos)
		if position.Filename == p.Output {
			continue // the previous output, read as empty
		}
		f := fileOf(p, te)
		if f != file {
			file = f
			clear(idents)
			if f != nil {
				ast.Inspect(f, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok {
						idents[p.Fset.Position(id.Pos()).Offset] = id
					}
					return true
				})
			}
		}
		if id := idents[position.Offset]; id != nil && missingExport(p, file, id, exports) {
			continue
		}
		diags = append(diags, explain(p, file, position, te.Msg))
	}
	return diags
}

// explain makes two type errors of a malformed package say what is wrong:
// an import that the go command could not load gets the go command's
// reason ("no required module provides package …; to add it: …"), and a
// file whose package clause differs from the others' is reported at the
// package name.
func explain(p *Package, f *ast.File, pos token.Position, msg string) Diagnostic {
	if rest, ok := strings.CutPrefix(msg, "could not import "); ok {
		path, _, _ := strings.Cut(rest, " ")
		if why := p.importErrors[path]; why != "" {
			return Diagnostic{Pos: pos, Msg: "could not import " + path + ": " + why}
		}
	}
	if got, want, ok := mismatchedPackage(msg); ok && f != nil {
		for _, other := range p.Files {
			if other.Name.Name == want {
				return Diagnostic{Pos: p.Fset.Position(f.Name.Pos()), Msg: fmt.Sprintf(
					"package %s; expected package %s, as %s declares: the files of a directory form one package",
					got, want, filepath.Base(p.Fset.Position(other.Package).Filename))}
			}
		}
	}
	return Diagnostic{Pos: pos, Msg: msg}
}

func fileOf(p *Package, te types.Error) *ast.File {
	for _, f := range p.Files {
		if f.FileStart <= te.Pos && te.Pos <= f.FileEnd {
			return f
		}
	}
	return nil
}

// missingExport reports whether id is an unresolved use of a name that a
// generated file will declare.
func missingExport(p *Package, f *ast.File, id *ast.Ident, exports map[string][]string) bool {
	if p.Info.Uses[id] != nil || p.Info.Defs[id] != nil {
		return false
	}
	if slices.Contains(exports[p.Path], id.Name) {
		return true
	}
	// other.RegisterAll: find the selector whose Sel is id.
	var pkgPath string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel == id {
			if x, ok := sel.X.(*ast.Ident); ok {
				if pn, ok := p.Info.Uses[x].(*types.PkgName); ok {
					pkgPath = pn.Imported().Path()
				}
			}
			return false
		}
		return pkgPath == ""
	})
	return pkgPath != "" && slices.Contains(exports[pkgPath], id.Name)
}

// Write makes the changes of r on disk: each file is written to a
// temporary file and renamed, so that no reader sees half a file; files
// no longer wanted are removed. It writes nothing if r has errors.
func (r *Result) Write() error {
	if r.Diagnostics.HasErrors() {
		return fmt.Errorf("simbagen: not writing: %d errors", len(r.Diagnostics.Errors()))
	}
	for _, c := range r.Changes {
		if !c.Stale {
			continue
		}
		if c.Content == nil {
			if err := os.Remove(c.Path); err != nil && !os.IsNotExist(err) {
				return err
			}
			continue
		}
		if err := writeFile(c.Path, c.Content); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, content []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".simba_gen-*.go.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
