package generator

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/simba-go/simba/annotations"
	"github.com/simba-go/simba/backends"
)

// RuntimePath is the import path of the package generated code calls.
const RuntimePath = "github.com/simba-go/simba/runtime"

// RuntimeAlias is the fixed name generated code imports RuntimePath under
// (the package's own name shadows the standard library's runtime).
const RuntimeAlias = "simbart"

// Check checks each found directive's function with go/types against the
// shapes of G1–G2 and builds the model of the package's generated
// file. It also reports what would make the generated file wrong: a lease
// or group used twice in the package, generated names that clash with the
// package's own, and package-level names that hide an identifier the
// generated file needs. Invalid directives (a nil Directive) are skipped:
// Extract has reported them. The model is nil if found holds no valid
// directive.
func Check(p *Package, found []Found) (*Model, Diagnostics) {
	if !slices.ContainsFunc(found, func(f Found) bool { return f.Directive != nil }) {
		return nil, nil
	}
	c := &checker{p: p, m: &Model{Pkg: p.Types, Output: p.Output}}
	for _, f := range found {
		if f.Directive == nil {
			continue
		}
		if t := c.task(f); t != nil {
			c.m.Tasks = append(c.m.Tasks, t)
		}
	}
	c.names()
	c.clashes()
	c.constraints()
	return c.m, c.diags
}

type checker struct {
	p     *Package
	m     *Model
	diags Diagnostics
}

// qualifier writes types of p unqualified and others by package name, as
// the user's code spells them.
func (c *checker) qualifier(other *types.Package) string {
	if other == c.p.Types {
		return ""
	}
	return other.Name()
}

func (c *checker) typeString(t types.Type) string { return types.TypeString(t, c.qualifier) }

// where returns "file.go:line" for pos, for messages that refer to a
// second place in the same package.
func (c *checker) where(pos token.Pos) string {
	position := c.p.Fset.Position(pos)
	return fmt.Sprintf("%s:%d", filepath.Base(position.Filename), position.Line)
}

// task checks one annotated function and returns its task, or nil.
func (c *checker) task(f Found) *Task {
	if f.Decl.Name.Name == "_" {
		what := "function _"
		if f.Decl.Recv != nil {
			what = "method " + funcName(f.Decl)
		}
		c.diags.errorf(c.p.Fset.Position(f.Decl.Name.Pos()), "the blank %s cannot be referred to, so simbagen cannot register it; give it a name", what)
		return nil
	}
	obj, _ := c.p.Info.Defs[f.Decl.Name].(*types.Func)
	if obj == nil {
		return nil // the type checker has reported why
	}
	d := f.Directive
	t := &Task{
		Directive: d,
		Text:      strings.TrimRightFunc(f.Comment.Text, unicode.IsSpace),
		Pos:       c.p.position(f.Comment.Slash, 0),
		Func:      obj,
	}
	if x := fileConstraint(f.File, c.p.Fset.Position(f.File.Package).Filename); x != nil {
		t.Constraint = x.String()
	}
	name := funcName(f.Decl)
	sig := obj.Signature()
	namePos := c.p.Fset.Position(f.Decl.Name.Pos())
	if sig.TypeParams().Len() > 0 {
		c.diags.errorf(namePos, "%s has type parameters; simbagen registers only functions without them", name)
		return nil
	}
	if recv := sig.Recv(); recv != nil {
		rt := recv.Type()
		if ptr, ok := rt.(*types.Pointer); ok {
			rt, t.RecvPointer = ptr.Elem(), true
		}
		named, _ := types.Unalias(rt).(*types.Named)
		if named == nil {
			return nil // an invalid receiver: the type checker has reported it
		}
		if named.TypeParams().Len() > 0 {
			c.diags.errorf(namePos, "%s is a method of the generic type %s; simbagen registers only methods of types without type parameters",
				name, named.Obj().Name())
			return nil
		}
		t.Recv = c.receiver(named)
		t.Recv.Pointer = t.Recv.Pointer || t.RecvPointer
		for _, id := range f.Decl.Recv.List[0].Names {
			if id.Name != "_" && !slices.Contains(t.Recv.Names, id.Name) {
				t.Recv.Names = append(t.Recv.Names, id.Name)
			}
		}
	}
	t.Register = registerName(c.p, f.Decl)
	if !c.signature(t, name, namePos, sig) {
		return nil
	}
	if d.Items != "" && !c.source(t, name) {
		return nil
	}
	return t
}

// registerName returns the name of the function that the generated file
// declares to register fd: Register<Func>, or Register<Recv><Method> for a
// method, with the receiver's type name as the type checker resolves it
// (through aliases) or, if it cannot, as written.
func registerName(p *Package, fd *ast.FuncDecl) string {
	name := fd.Name.Name
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return "Register" + exported(name)
	}
	if obj, ok := p.Info.Defs[fd.Name].(*types.Func); ok && obj.Signature().Recv() != nil {
		rt := obj.Signature().Recv().Type()
		if ptr, ok := rt.(*types.Pointer); ok {
			rt = ptr.Elem()
		}
		if named, ok := types.Unalias(rt).(*types.Named); ok {
			return "Register" + exported(named.Obj().Name()) + exported(name)
		}
	}
	return "Register" + exported(recvTypeName(fd)) + exported(name)
}

func (c *checker) receiver(named *types.Named) *Receiver {
	for _, r := range c.m.Receivers {
		if r.Named == named {
			return r
		}
	}
	r := &Receiver{Named: named}
	c.m.Receivers = append(c.m.Receivers, r)
	return r
}

// signature checks the annotated function's signature (G1, G2) and records
// the item type of typed steps.
func (c *checker) signature(t *Task, name string, namePos token.Position, sig *types.Signature) bool {
	if invalid(sig) {
		return false // the type checker has reported it
	}
	d := t.Directive
	params, results := sig.Params(), sig.Results()
	n := 2
	if t.Partitioned() {
		n++
	}
	typed := d.Items != ""
	if typed {
		n++
	}
	wrong := -1 // the only wrong parameter, if only one is wrong
	ok := !sig.Variadic() && params.Len() == n && results.Len() == 1 && isError(results.At(0).Type())
	if params.Len() == n && !sig.Variadic() {
		for i := range n - boolInt(typed) {
			if !c.paramOK(t, i, params.At(i).Type()) {
				if ok {
					wrong = i
				} else {
					wrong = -1
				}
				ok = false
			}
		}
	}
	if ok {
		if typed {
			t.Item = params.At(n - 1).Type()
		}
		return true
	}
	pos := namePos
	switch {
	case wrong >= 0:
		pos = c.p.Fset.Position(params.At(wrong).Pos())
	case params.Len() == n && !sig.Variadic() && results.Len() == 1 && !isError(results.At(0).Type()) && c.paramsOK(t, params, n):
		pos = c.p.Fset.Position(results.At(0).Pos())
	}
	item := "item T"
	if typed && params.Len() == n {
		item = "item " + c.typeString(params.At(n-1).Type())
	}
	hint := ""
	switch {
	case !typed && !sig.Variadic() && params.Len() == n+1 && c.paramsOK(t, params, n):
		hint = "; to run it once per item, add items=SOURCE naming the function that yields them (G2)"
	case typed && params.Len() == n-1 && c.paramsOK(t, params, n-1):
		hint = fmt.Sprintf("; with items=%s it takes one item as its last parameter (G2)", d.Items)
	}
	c.diags.errorf(pos, "%s has the wrong signature for %s%s: have %s; want %s%s",
		name, annotations.Prefix, d.Kind, c.typeString(sig), c.want(t, item, "error"), hint)
	return false
}

// paramsOK reports whether the first n parameters, but the item, are right.
func (c *checker) paramsOK(t *Task, params *types.Tuple, n int) bool {
	k := min(n, 2+boolInt(t.Partitioned()))
	for i := range k {
		if !c.paramOK(t, i, params.At(i).Type()) {
			return false
		}
	}
	return true
}

func (c *checker) paramOK(t *Task, i int, typ types.Type) bool {
	switch i {
	case 0:
		return isNamed(typ, "context", "Context")
	case 1:
		ptr, ok := types.Unalias(typ).(*types.Pointer)
		return ok && isNamed(ptr.Elem(), RuntimePath, "Term")
	case 2:
		if t.Partitioned() {
			return types.Identical(typ, types.Typ[types.Int])
		}
	}
	return true // the item: any type
}

// want returns the signature a directive asks for, with the given item
// parameter (if typed) and results.
func (c *checker) want(t *Task, item, results string) string {
	var b strings.Builder
	b.WriteString("func(ctx context.Context, t *runtime.Term")
	if t.Partitioned() {
		b.WriteString(", partition int")
	}
	if item != "" && t.Directive.Items != "" {
		b.WriteString(", " + item)
	}
	b.WriteString(") " + results)
	return b.String()
}

// source finds and checks the items= source of typed steps (G2): a method
// of the same receiver or a function of the package, taking the context,
// the term and (partitioned) the partition, and returning
// iter.Seq2[T, error] or ([]T, error) for the item type T.
func (c *checker) source(t *Task, name string) bool {
	d := t.Directive
	off, _ := d.ValueOffset("items")
	var obj types.Object
	if t.Recv != nil {
		var recvType types.Type = t.Recv.Named
		if t.RecvPointer {
			recvType = types.NewPointer(recvType)
		}
		obj, _, _ = types.LookupFieldOrMethod(recvType, true, c.p.Types, d.Items)
		if fn, ok := obj.(*types.Func); ok {
			t.SourceIsMethod = true
			obj = fn
		} else if obj != nil {
			c.diags.errorf(t.directivePos(off), "items=%s: %s.%s is a field, not a method; want a method or function that yields the items",
				d.Items, t.Recv.Named.Obj().Name(), d.Items)
			return false
		}
	}
	if obj == nil {
		obj = c.p.Types.Scope().Lookup(d.Items)
	}
	fn, ok := obj.(*types.Func)
	switch {
	case obj == nil && t.Recv != nil:
		c.diags.errorf(t.directivePos(off), "items=%s: no method %s on %s and no function %s in package %s; want the source of the items of %s",
			d.Items, d.Items, c.recvString(t), d.Items, c.p.Name, name)
		return false
	case obj == nil:
		c.diags.errorf(t.directivePos(off), "items=%s: no function %s in package %s; want the source of the items of %s",
			d.Items, d.Items, c.p.Name, name)
		return false
	case !ok:
		c.diags.errorf(t.directivePos(off), "items=%s: %s is %s, not a function", d.Items, d.Items, kindOf(obj))
		return false
	}
	t.Source = fn
	sig := fn.Signature()
	if invalid(sig) {
		return false
	}
	srcPos := c.p.Fset.Position(fn.Pos())
	srcName := d.Items
	if t.SourceIsMethod {
		srcName = c.recvName(fn) + "." + d.Items
	}
	if sig.TypeParams().Len() > 0 {
		c.diags.errorf(srcPos, "%s, the items= source of %s, has type parameters; want a function without them", srcName, name)
		return false
	}
	params, results := sig.Params(), sig.Results()
	n := 2 + boolInt(t.Partitioned())
	ok = !sig.Variadic() && params.Len() == n && c.paramsOK(t, params, n)
	if ok {
		switch results.Len() {
		case 1:
			ok = isSeq2(results.At(0).Type(), t.Item)
		case 2:
			s, isSlice := types.Unalias(results.At(0).Type()).(*types.Slice)
			ok = isSlice && types.Identical(s.Elem(), t.Item) && isError(results.At(1).Type())
			t.SourceSlice = true
		default:
			ok = false
		}
	}
	if !ok {
		item := c.typeString(t.Item)
		c.diags.errorf(srcPos, "%s, the items= source of %s, has the wrong signature: have %s; want %s or %s",
			srcName, name, c.typeString(sig),
			c.want(t, "", "iter.Seq2["+item+", error]"), c.want(t, "", "([]"+item+", error)"))
		return false
	}
	return true
}

func (c *checker) recvString(t *Task) string {
	if t.RecvPointer {
		return "*" + t.Recv.Named.Obj().Name()
	}
	return t.Recv.Named.Obj().Name()
}

// recvName returns "(*T)" or "T" for a method.
func (c *checker) recvName(fn *types.Func) string {
	rt := fn.Signature().Recv().Type()
	if ptr, ok := rt.(*types.Pointer); ok {
		return "(*" + c.typeString(ptr.Elem()) + ")"
	}
	return c.typeString(rt)
}

func (t *Task) directivePos(offset int) token.Position {
	pos := t.Pos
	pos.Column += offset
	pos.Offset += offset
	return pos
}

// names reports leases and groups used twice in the package, and leases
// that are partitions of a group of the package: the client would refuse
// the second at RegisterAll (G1).
func (c *checker) names() {
	seen := make(map[string]*Task)
	groups := make(map[string]*Task)
	for _, t := range c.m.Tasks {
		d := t.Directive
		key := d.Kind.NameKey()
		off, _ := d.ValueOffset(key)
		if prev := seen[key+" "+d.Name]; prev != nil {
			c.diags.errorf(t.directivePos(off), "%s %q is already used by %s (%s); a %s belongs to one function",
				key, d.Name, c.funcString(prev), c.where(prev.Func.Pos()), key)
			continue
		}
		seen[key+" "+d.Name] = t
		if d.Kind == annotations.Partitioned {
			groups[d.Name] = t
		}
	}
	for _, t := range c.m.Tasks {
		d := t.Directive
		if d.Kind != annotations.Scheduled {
			continue
		}
		if group, i, ok := backends.SplitPartition(d.Name); ok {
			if g := groups[group]; g != nil && i < g.Directive.Partitions {
				off, _ := d.ValueOffset("lease")
				c.diags.errorf(t.directivePos(off), "lease %q is partition %d of the group %q of %s (%s); use another lease name",
					d.Name, i, group, c.funcString(g), c.where(g.Func.Pos()))
			}
		}
	}
}

// constraints sets the model's build constraint, that of the files of the
// annotated functions, and reports a function whose file has another one
// than the first: one generated file per package cannot carry both, and
// either constraint would leave the other's functions unregistered or the
// file uncompilable.
func (c *checker) constraints() {
	if len(c.m.Tasks) == 0 {
		return
	}
	first := c.m.Tasks[0]
	c.m.Constraint = first.Constraint
	describe := func(t *Task) string {
		if t.Constraint == "" {
			return "in a file without a build constraint"
		}
		return fmt.Sprintf("in a file with the build constraint %q", t.Constraint)
	}
	for _, t := range c.m.Tasks[1:] {
		if t.Constraint != first.Constraint {
			c.diags.errorf(t.Pos, "%s is %s, but %s (%s) is %s; %s carries one build constraint for the package: put its annotated functions in files under the same one",
				c.funcString(t), describe(t), c.funcString(first), c.where(first.Func.Pos()), describe(first), OutputName)
		}
	}
}

// funcString returns "F" or "(*T).M" or "T.M".
func (c *checker) funcString(t *Task) string {
	if t.Recv == nil {
		return t.Func.Name()
	}
	if t.RecvPointer {
		return "(*" + t.Recv.Named.Obj().Name() + ")." + t.Func.Name()
	}
	return t.Recv.Named.Obj().Name() + "." + t.Func.Name()
}

// clashes reports generated names that the package declares too, and
// package-level names that would hide what the generated file uses. A
// clash is never resolved by renaming (G3).
func (c *checker) clashes() {
	scope := c.p.Types.Scope()
	byName := make(map[string]*Task)
	for _, t := range c.m.Tasks {
		if prev := byName[t.Register]; prev != nil {
			c.diags.errorf(t.Pos, "simbagen would generate %s for both %s (%s) and %s; rename one of them",
				t.Register, c.funcString(prev), c.where(prev.Func.Pos()), c.funcString(t))
			continue
		}
		byName[t.Register] = t
		if obj := scope.Lookup(t.Register); obj != nil {
			c.diags.errorf(c.p.Fset.Position(obj.Pos()), "%s clashes with the function simbagen generates for %s (%s); rename one of them",
				t.Register, c.funcString(t), c.where(t.Func.Pos()))
		}
	}
	if obj := scope.Lookup("RegisterAll"); obj != nil {
		c.diags.errorf(c.p.Fset.Position(obj.Pos()), "RegisterAll clashes with the function simbagen generates to register every annotated function of the package; rename it")
	}
	if obj := scope.Lookup(RuntimeAlias); obj != nil {
		c.diags.errorf(c.p.Fset.Position(obj.Pos()), "%s clashes with the name %s imports %s under; rename it",
			RuntimeAlias, OutputName, RuntimePath)
	}
	used := []string{"error", "nil", "append", "len"}
	for _, t := range c.m.Tasks {
		if t.Partitioned() {
			used = append(used, "int")
			break
		}
	}
	for _, name := range used {
		if obj := scope.Lookup(name); obj != nil {
			c.diags.errorf(c.p.Fset.Position(obj.Pos()), "%s hides the predeclared %s, which %s uses; rename it",
				name, name, OutputName)
		}
	}
}

func isNamed(t types.Type, path, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == path && n.Obj().Name() == name
}

func isError(t types.Type) bool { return types.Identical(t, types.Universe.Lookup("error").Type()) }

// isSeq2 reports whether t is iter.Seq2[item, error].
func isSeq2(t types.Type, item types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || !isNamed(n, "iter", "Seq2") || n.TypeArgs().Len() != 2 {
		return false
	}
	return types.Identical(n.TypeArgs().At(0), item) && isError(n.TypeArgs().At(1))
}

// invalid reports whether sig mentions an invalid type (the type checker
// has reported the cause).
func invalid(sig *types.Signature) bool {
	for _, tuple := range []*types.Tuple{sig.Params(), sig.Results()} {
		for v := range tuple.Variables() {
			if hasInvalid(v.Type()) {
				return true
			}
		}
	}
	return false
}

func hasInvalid(t types.Type) bool {
	switch t := types.Unalias(t).(type) {
	case *types.Basic:
		return t.Kind() == types.Invalid
	case *types.Pointer:
		return hasInvalid(t.Elem())
	case *types.Slice:
		return hasInvalid(t.Elem())
	case *types.Array:
		return hasInvalid(t.Elem())
	case *types.Map:
		return hasInvalid(t.Key()) || hasInvalid(t.Elem())
	case *types.Chan:
		return hasInvalid(t.Elem())
	case *types.Named:
		for a := range t.TypeArgs().Types() {
			if hasInvalid(a) {
				return true
			}
		}
	case *types.Signature:
		return invalid(t)
	}
	return false
}

func kindOf(obj types.Object) string {
	switch obj.(type) {
	case *types.TypeName:
		return "a type"
	case *types.Var:
		return "a variable"
	case *types.Const:
		return "a constant"
	case *types.PkgName:
		return "an imported package"
	}
	return "not a function"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exported returns s with its first letter in upper case.
func exported(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}
