package generator

import (
	"cmp"
	"go/types"
	"slices"

	"github.com/dave/jennifer/jen"
)

// typ writes t as Go source, qualifying the types of other packages through
// jennifer so that their imports are added. Named types and aliases are
// written by name, as the user wrote them.
func (e *emitter) typ(t types.Type) *jen.Statement {
	switch t := t.(type) {
	case *types.Alias:
		return e.typeName(t.Obj(), t.TypeArgs())
	case *types.Named:
		return e.typeName(t.Obj(), t.TypeArgs())
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			return jen.Qual("unsafe", "Pointer")
		}
		return jen.Id(t.Name())
	case *types.Pointer:
		return jen.Op("*").Add(e.typ(t.Elem()))
	case *types.Slice:
		return jen.Index().Add(e.typ(t.Elem()))
	case *types.Array:
		return jen.Index(jen.Lit(int(t.Len()))).Add(e.typ(t.Elem()))
	case *types.Map:
		return jen.Map(e.typ(t.Key())).Add(e.typ(t.Elem()))
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			return jen.Chan().Op("<-").Add(e.typ(t.Elem()))
		case types.RecvOnly:
			return jen.Op("<-").Chan().Add(e.typ(t.Elem()))
		}
		return jen.Chan().Add(e.typ(t.Elem()))
	case *types.Signature:
		return jen.Func().Add(e.signature(t))
	case *types.Struct:
		return jen.StructFunc(func(g *jen.Group) {
			for i := range t.NumFields() {
				f := t.Field(i)
				var field *jen.Statement
				if f.Embedded() {
					field = e.typ(f.Type())
				} else {
					field = jen.Id(f.Name()).Add(e.typ(f.Type()))
				}
				if tag := t.Tag(i); tag != "" {
					field.Op("`" + tag + "`")
				}
				g.Add(field)
			}
		})
	case *types.Interface:
		return jen.InterfaceFunc(func(g *jen.Group) {
			for i := range t.NumEmbeddeds() {
				g.Add(e.typ(t.EmbeddedType(i)))
			}
			for i := range t.NumExplicitMethods() {
				m := t.ExplicitMethod(i)
				g.Id(m.Name()).Add(e.signature(m.Signature()))
			}
		})
	case *types.Union:
		var terms []jen.Code
		for i := range t.Len() {
			term := t.Term(i)
			code := e.typ(term.Type())
			if term.Tilde() {
				code = jen.Op("~").Add(code)
			}
			terms = append(terms, code)
		}
		return jen.Union(terms...)
	case *types.TypeParam:
		return jen.Id(t.Obj().Name())
	}
	return jen.Id(types.TypeString(t, nil))
}

// signature writes a signature's parameters and results, unnamed.
func (e *emitter) signature(sig *types.Signature) *jen.Statement {
	params := jen.ParamsFunc(func(g *jen.Group) {
		for i := range sig.Params().Len() {
			p := sig.Params().At(i).Type()
			if sig.Variadic() && i == sig.Params().Len()-1 {
				g.Op("...").Add(e.typ(p.(*types.Slice).Elem()))
				continue
			}
			g.Add(e.typ(p))
		}
	})
	switch sig.Results().Len() {
	case 0:
		return params
	case 1:
		return params.Add(e.typ(sig.Results().At(0).Type()))
	}
	return params.ParamsFunc(func(g *jen.Group) {
		for v := range sig.Results().Variables() {
			g.Add(e.typ(v.Type()))
		}
	})
}

func (e *emitter) typeName(obj *types.TypeName, args *types.TypeList) *jen.Statement {
	var s *jen.Statement
	if obj.Pkg() == nil || obj.Pkg() == e.m.Pkg {
		s = jen.Id(obj.Name())
	} else {
		s = jen.Qual(obj.Pkg().Path(), obj.Name())
	}
	if args.Len() > 0 {
		var codes []jen.Code
		for a := range args.Types() {
			codes = append(codes, e.typ(a))
		}
		s = s.Types(codes...)
	}
	return s
}

// packagesOf adds to seen the packages, other than self, whose types t
// mentions by name.
func packagesOf(t types.Type, self *types.Package, seen map[string]*types.Package) {
	addName := func(obj *types.TypeName, args *types.TypeList) {
		if p := obj.Pkg(); p != nil && p != self {
			seen[p.Path()] = p
		}
		for a := range args.Types() {
			packagesOf(a, self, seen)
		}
	}
	switch t := t.(type) {
	case *types.Alias:
		addName(t.Obj(), t.TypeArgs())
	case *types.Named:
		addName(t.Obj(), t.TypeArgs())
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			seen["unsafe"] = types.Unsafe
		}
	case *types.Pointer:
		packagesOf(t.Elem(), self, seen)
	case *types.Slice:
		packagesOf(t.Elem(), self, seen)
	case *types.Array:
		packagesOf(t.Elem(), self, seen)
	case *types.Chan:
		packagesOf(t.Elem(), self, seen)
	case *types.Map:
		packagesOf(t.Key(), self, seen)
		packagesOf(t.Elem(), self, seen)
	case *types.Signature:
		for _, tuple := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tuple.Variables() {
				packagesOf(v.Type(), self, seen)
			}
		}
	case *types.Struct:
		for f := range t.Fields() {
			packagesOf(f.Type(), self, seen)
		}
	case *types.Interface:
		for i := range t.NumEmbeddeds() {
			packagesOf(t.EmbeddedType(i), self, seen)
		}
		for i := range t.NumExplicitMethods() {
			packagesOf(t.ExplicitMethod(i).Type(), self, seen)
		}
	case *types.Union:
		for i := range t.Len() {
			packagesOf(t.Term(i).Type(), self, seen)
		}
	}
}

func sortPackages(pkgs []*types.Package) {
	slices.SortFunc(pkgs, func(a, b *types.Package) int { return cmp.Compare(a.Path(), b.Path()) })
}
