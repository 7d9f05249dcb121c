package generator

import (
	"go/ast"
	"strings"
	"unicode"

	"github.com/simba-go/simba/annotations"
)

// Found is a directive on a top-level function or method.
type Found struct {
	File    *ast.File     // the file that declares the function
	Decl    *ast.FuncDecl // the function or method the directive is on
	Comment *ast.Comment  // the directive's line, for positions
	// Directive is nil if the directive is invalid: Extract has reported
	// why, and the function still names a function the generated file
	// would declare (see [generatedNames]).
	Directive *annotations.Directive
}

// Extract finds the simba directives in p's files, from the raw text of
// every line comment (never CommentGroup.Text, which drops directives). It
// returns the first directive on each top-level function and method, valid
// or not, in source order, and diagnostics for everything else: invalid
// directives, directives anywhere but directly above a top-level function
// (G1), a second directive on one function, and near misses (warnings).
func Extract(p *Package) ([]Found, Diagnostics) {
	var found []Found
	var diags Diagnostics
	for _, f := range p.Files {
		if p.Previous != nil && p.Fset.Position(f.Package).Filename == p.Output {
			continue
		}
		owners := docOwners(f)
		first := make(map[*ast.FuncDecl]*ast.Comment)
		for _, group := range f.Comments {
			for _, c := range group.List {
				if w := annotations.NearMiss(c.Text); w != nil {
					diags.warnf(p.position(c.Slash, w.Offset), "%s", w.Msg)
					continue
				}
				d, err := annotations.Parse(c.Text)
				if d == nil && err == nil {
					continue
				}
				if list, ok := err.(annotations.ErrorList); ok {
					for _, e := range list {
						diags.errorf(p.position(c.Slash, e.Offset), "%s", e.Msg)
					}
				}
				owner := owners[group]
				fd, ok := owner.(*ast.FuncDecl)
				if !ok {
					diags.errorf(p.position(c.Slash, 0), "%s is %s; it must be directly above a top-level function or method",
						directiveName(c.Text), placement(f, owner, c))
					continue
				}
				if prev := first[fd]; prev != nil {
					diags.errorf(p.position(c.Slash, 0), "%s already has %s (line %d); a function takes one directive",
						funcName(fd), directiveName(prev.Text), p.Fset.Position(prev.Slash).Line)
					continue
				}
				first[fd] = c
				found = append(found, Found{File: f, Decl: fd, Comment: c, Directive: d})
			}
		}
	}
	return found, diags
}

// ExtractIgnored returns a warning for every simba directive, valid or
// not, and every near miss in the files of p that the build does not
// type-check, which generate nothing: its test files and the files that
// the build constraints exclude. simbagen does not load them, so such a
// directive would otherwise be ignored in silence.
func ExtractIgnored(p *Package) Diagnostics {
	var diags Diagnostics
	warn := func(files []*ast.File, msg string) {
		for _, f := range files {
			for _, group := range f.Comments {
				for _, c := range group.List {
					if d, err := annotations.Parse(c.Text); d != nil || err != nil || annotations.NearMiss(c.Text) != nil {
						diags.warnf(p.position(c.Slash, 0), "%s", msg)
					}
				}
			}
		}
	}
	warn(p.TestFiles, "directive in a _test.go file is ignored: simbagen generates code only for the package's non-test files")
	warn(p.ExcludedFiles, "directive in a file that the build constraints exclude is ignored: simbagen generates code only for the files of the build it loads (set -tags, GOOS or GOARCH to include the file)")
	return diags
}

// docOwners maps each doc comment of f to what it documents: a
// *ast.FuncDecl, or a string saying what else.
func docOwners(f *ast.File) map[*ast.CommentGroup]any {
	owners := make(map[*ast.CommentGroup]any)
	add := func(g *ast.CommentGroup, owner any) {
		if g != nil {
			owners[g] = owner
		}
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			add(decl.Doc, decl)
		case *ast.GenDecl:
			what := "above " + article(decl.Tok.String()) + " declaration"
			add(decl.Doc, what)
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					add(spec.Doc, what)
				case *ast.ValueSpec:
					add(spec.Doc, what)
				case *ast.ImportSpec:
					add(spec.Doc, what)
				}
			}
		}
	}
	// Fields of structs and methods of interfaces, wherever they are.
	ast.Inspect(f, func(n ast.Node) bool {
		if field, ok := n.(*ast.Field); ok {
			add(field.Doc, "above a field or interface method")
		}
		return true
	})
	return owners
}

// placement says where a misplaced directive is.
func placement(f *ast.File, owner any, c *ast.Comment) string {
	if what, ok := owner.(string); ok {
		return what
	}
	for _, decl := range f.Decls {
		if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil && fd.Body.Pos() < c.Pos() && c.Pos() < fd.Body.End() {
			return "inside a function body"
		}
	}
	return "not directly above a declaration"
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// directiveName returns the directive's first word, as in
// "//simba:scheduled".
func directiveName(text string) string {
	if i := strings.IndexFunc(text, unicode.IsSpace); i >= 0 {
		return text[:i]
	}
	return text
}

// funcName returns "F" or "(*T).M" or "T.M", as a Go method expression.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	if _, star := fd.Recv.List[0].Type.(*ast.StarExpr); star {
		return "(*" + recvTypeName(fd) + ")." + fd.Name.Name
	}
	return recvTypeName(fd) + "." + fd.Name.Name
}

// recvTypeName returns the name of the method fd's receiver type as
// written, without its pointer or type arguments: "T" for (t *T[K]), "?"
// if it is not a name.
func recvTypeName(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
