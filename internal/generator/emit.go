package generator

import (
	"fmt"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dave/jennifer/jen"

	"github.com/simba-go/simba/annotations"
)

// Emit builds the generated file of m with jennifer (G3): the header,
// the runtime imported as simbart, a reference to SupportPackageIsVersion1,
// a signature guard per annotated function, one documented Register
// function per annotated function and RegisterAll. Everything in it depends
// only on m, so the same input gives the same bytes.
func Emit(m *Model) *jen.File {
	e := newEmitter(m)
	f := e.f
	f.HeaderComment(strings.TrimPrefix(Header, "// "))

	f.Comment("A runtime too old for this file fails to compile here.")
	f.Var().Id("_").Op("=").Qual(RuntimePath, "SupportPackageIsVersion1")
	f.Line()

	f.Comment("Signature guards: a function whose signature changed since this file was")
	f.Comment("generated fails to compile here. Run go generate again.")
	f.Var().DefsFunc(func(g *jen.Group) {
		for _, t := range m.Tasks {
			g.Id("_").Add(e.funcType(t)).Op("=").Add(e.guardValue(t))
		}
	})
	for _, t := range m.Tasks {
		f.Line()
		e.register(t)
	}
	f.Line()
	e.registerAll()
	return f
}

// emitter holds the file being built and the names of its identifiers.
type emitter struct {
	m     *Model
	f     *jen.File
	taken map[string]bool   // package-level, predeclared and import names
	local map[string]string // local name → the name used, if it was taken
	recv  map[*Receiver]string
}

func newEmitter(m *Model) *emitter {
	e := &emitter{
		m:     m,
		f:     jen.NewFilePathName(m.Pkg.Path(), m.Pkg.Name()),
		taken: make(map[string]bool),
		local: make(map[string]string),
		recv:  make(map[*Receiver]string),
	}
	// The package-level names the generated code refers to: the
	// annotated functions and sources that are functions, the Register
	// functions (called from RegisterAll). Other package-level names may
	// be shadowed by a local: the code never refers to them.
	for _, t := range m.Tasks {
		e.taken[t.Register] = true
		if t.Recv == nil {
			e.taken[t.Func.Name()] = true
		}
		if t.Source != nil && !t.SourceIsMethod {
			e.taken[t.Source.Name()] = true
		}
	}
	for _, name := range types.Universe.Names() {
		e.taken[name] = true
	}
	scope := m.Pkg.Scope()
	// Imports: the runtime under its fixed alias, and every other package
	// under its own name unless the package declares that name, then under
	// the name and a number.
	e.f.ImportAlias(RuntimePath, RuntimeAlias)
	e.taken[RuntimeAlias] = true
	for _, pkg := range e.imports() {
		name := pkg.Name()
		if !e.taken[name] && scope.Lookup(name) == nil {
			e.f.ImportName(pkg.Path(), name)
			e.taken[name] = true
			continue
		}
		// As a person would: stdtime for the standard library's time,
		// modelpkg for a package model; a number only if those are taken
		// too.
		alias := name + "pkg"
		if !strings.Contains(pkg.Path(), ".") {
			alias = "std" + name
		}
		for i := 2; e.taken[alias] || scope.Lookup(alias) != nil; i++ {
			alias = name + strconv.Itoa(i)
		}
		e.f.ImportAlias(pkg.Path(), alias)
		e.taken[alias] = true
	}
	// The parameters of the exported functions, then the locals, take
	// the first of their names that is free: none hides something the
	// generated code refers to, or another of them. The receivers come
	// first, named after their type (a *Service is service) or else as
	// the methods name them, then the client (c, or client if a receiver
	// is c), then the locals.
	for _, r := range m.Receivers {
		e.recv[r] = e.pick(slices.Concat([]string{lowerCamel(r.Named.Obj().Name())}, r.Names)...)
	}
	for _, l := range locals {
		e.local[l[0]] = e.pick(l...)
	}
	return e
}

// locals are the generated code's parameter and local names, each with the
// names it takes instead when the first is taken, in order.
var locals = [][]string{
	{"c", "client", "cl"},    // the *simbart.Client parameter
	{"ctx", "runCtx"},        // the typed-steps wrapper's parameters
	{"t", "term"},            //
	{"partition", "part"},    //
	{"item", "elem"},         // an item, in the loop
	{"items", "batch"},       // a source's slice
	{"err", "runErr"},        //
	{"e", "reg"},             // what StartSchedule returns, a registration
	{"g", "group"},           // what StartGroup returns
	{"run", "steps"},         // the typed-steps wrapper
	{"step", "stepValidity"}, // the step constant
	{"loc", "location"},      // a cron schedule's location
}

// pick returns the first of names that is free (not taken and not a
// keyword), or else the first with the smallest number that makes it
// free, and takes it.
func (e *emitter) pick(names ...string) string {
	for _, name := range names {
		if name != "" && name != "_" && !e.taken[name] && !token.IsKeyword(name) {
			e.taken[name] = true
			return name
		}
	}
	return e.fresh(names[0])
}

// imports returns the packages the file needs, the runtime aside, sorted
// by path: context, time and those of item types.
func (e *emitter) imports() []*types.Package {
	seen := make(map[string]*types.Package)
	for _, path := range []string{"context", "time"} {
		seen[path] = types.NewPackage(path, path)
	}
	for _, t := range e.m.Tasks {
		if t.Item != nil {
			packagesOf(t.Item, e.m.Pkg, seen)
		}
	}
	pkgs := make([]*types.Package, 0, len(seen))
	for _, p := range seen {
		pkgs = append(pkgs, p)
	}
	sortPackages(pkgs)
	return pkgs
}

// fresh returns name, or name with a number if name is taken, and takes
// it.
func (e *emitter) fresh(name string) string {
	try := name
	for i := 2; e.taken[try] || token.IsKeyword(try); i++ {
		try = name + strconv.Itoa(i)
	}
	e.taken[try] = true
	return try
}

func (e *emitter) id(local string) *jen.Statement { return jen.Id(e.local[local]) }

// funcType is the type of t's function, as a function value: its method
// expression's type for a method (the receiver first).
func (e *emitter) funcType(t *Task) *jen.Statement {
	return jen.Func().ParamsFunc(func(g *jen.Group) {
		if t.Recv != nil {
			g.Add(e.recvType(t.Recv, t.RecvPointer))
		}
		g.Qual("context", "Context")
		g.Op("*").Qual(RuntimePath, "Term")
		if t.Partitioned() {
			g.Int()
		}
		if t.Item != nil {
			g.Add(e.typ(t.Item))
		}
	}).Error()
}

// guardValue is t's function as a value: Report, or a method expression
// such as (*Service).Report.
func (e *emitter) guardValue(t *Task) *jen.Statement {
	if t.Recv == nil {
		return jen.Id(t.Func.Name())
	}
	if t.RecvPointer {
		return jen.Parens(jen.Op("*").Id(t.Recv.Named.Obj().Name())).Dot(t.Func.Name())
	}
	return jen.Id(t.Recv.Named.Obj().Name()).Dot(t.Func.Name())
}

func (e *emitter) recvType(r *Receiver, pointer bool) *jen.Statement {
	if pointer {
		return jen.Op("*").Id(r.Named.Obj().Name())
	}
	return jen.Id(r.Named.Obj().Name())
}

// callee is t's function as called in its Register function: Report, or
// the method value service.Report.
func (e *emitter) callee(t *Task, name string, method bool) *jen.Statement {
	if method {
		return jen.Id(e.recv[t.Recv]).Dot(name)
	}
	return jen.Id(name)
}

// register emits Register<Func> or Register<Recv><Method> for t.
func (e *emitter) register(t *Task) {
	f, d := e.f, t.Directive
	for _, line := range wrap(e.doc(t), 77) {
		f.Comment(line)
	}
	f.Comment("")
	f.Comment("\t" + t.Text)
	f.Func().Id(t.Register).ParamsFunc(func(g *jen.Group) {
		g.Id(e.local["c"]).Op("*").Qual(RuntimePath, "Client")
		if t.Recv != nil {
			g.Id(e.recv[t.Recv]).Add(e.recvType(t.Recv, t.RecvPointer))
		}
	}).Params(jen.Qual(RuntimePath, "Registration"), jen.Error()).BlockFunc(func(g *jen.Group) {
		fn := e.callee(t, t.Func.Name(), t.Recv != nil)
		step := durationCode(d.Step)
		if t.Item != nil {
			if d.Step != 0 {
				g.Const().Add(e.id("step")).Op("=").Add(step)
				step = e.id("step")
			}
			g.Add(e.id("run")).Op(":=").Func().Params(e.runParams(t)...).Error().BlockFunc(func(g *jen.Group) {
				e.steps(g, t, step)
			})
			fn = e.id("run")
		}
		if d.TZ != "" {
			g.List(e.id("loc"), e.id("err")).Op(":=").Qual("time", "LoadLocation").Call(jen.Lit(d.TZ))
			g.If(e.id("err").Op("!=").Nil()).Block(jen.Return(jen.Nil(), e.id("err")))
		}
		result := e.id("e")
		start := jen.Add(e.id("c")).Dot("StartSchedule").Call(jen.Lit(d.Name), e.schedule(d, step), fn)
		if t.Partitioned() {
			result = e.id("g")
			start = jen.Add(e.id("c")).Dot("StartGroup").Call(jen.Lit(d.Name), jen.Lit(d.Partitions), e.schedule(d, step), fn)
		}
		g.List(result, e.id("err")).Op(":=").Add(start)
		g.If(e.id("err").Op("!=").Nil()).Block(jen.Return(jen.Nil(), e.id("err")))
		g.Return(result, jen.Nil())
	})
}

// runParams are the parameters of the typed-steps wrapper: a TaskFunc, or
// a PartitionFunc.
func (e *emitter) runParams(t *Task) []jen.Code {
	params := []jen.Code{
		e.id("ctx").Qual("context", "Context"),
		e.id("t").Op("*").Qual(RuntimePath, "Term"),
	}
	if t.Partitioned() {
		params = append(params, e.id("partition").Int())
	}
	return params
}

// steps emits the body of the typed-steps wrapper (G2): iterate the
// source; before each item, check that the term stays valid for the step
// (E1); pass the term with each item. An item's error or a failed check
// ends the run.
func (e *emitter) steps(g *jen.Group, t *Task, step jen.Code) {
	args := []jen.Code{e.id("ctx"), e.id("t")}
	if t.Partitioned() {
		args = append(args, e.id("partition"))
	}
	source := e.callee(t, t.Source.Name(), t.SourceIsMethod).Call(args...)
	check := "Start an item only if the term stays valid for more than step."
	if t.Directive.Step == 0 {
		check = "Start an item only if the term is still valid."
	}
	each := []jen.Code{
		jen.Comment(check),
		jen.If(e.id("err").Op(":=").Add(e.id("t")).Dot("EnsureValid").Call(step), e.id("err").Op("!=").Nil()).
			Block(jen.Return(e.id("err"))),
		jen.If(e.id("err").Op(":=").Add(e.callee(t, t.Func.Name(), t.Recv != nil)).Call(append(args, e.id("item"))...), e.id("err").Op("!=").Nil()).
			Block(jen.Return(e.id("err"))),
	}
	if t.SourceSlice {
		g.List(e.id("items"), e.id("err")).Op(":=").Add(source)
		g.If(e.id("err").Op("!=").Nil()).Block(jen.Return(e.id("err")))
		g.For(jen.List(jen.Id("_"), e.id("item")).Op(":=").Range().Add(e.id("items"))).Block(each...)
	} else {
		g.For(jen.List(e.id("item"), e.id("err")).Op(":=").Range().Add(source)).Block(
			append([]jen.Code{jen.If(e.id("err").Op("!=").Nil()).Block(jen.Return(e.id("err")))}, each...)...)
	}
	g.Return(jen.Nil())
}

// schedule is the simbart.Schedule literal of d, the zero fields left out.
func (e *emitter) schedule(d *annotations.Directive, step jen.Code) *jen.Statement {
	var fields []jen.Code
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Rate", d.Rate}, {"Delay", d.Delay}, {"Initial", d.Initial}} {
		if f.d != 0 {
			fields = append(fields, jen.Id(f.name).Op(":").Add(durationCode(f.d)))
		}
	}
	if d.Cron != "" {
		fields = append(fields, jen.Id("Cron").Op(":").Lit(d.Cron))
	}
	if d.TZ != "" {
		fields = append(fields, jen.Id("Location").Op(":").Add(e.id("loc")))
	}
	if d.OverlapAfter {
		fields = append(fields, jen.Id("Overlap").Op(":").Qual(RuntimePath, "OverlapAfter"))
	}
	if d.CatchUp != 0 {
		fields = append(fields, jen.Id("CatchUp").Op(":").Add(durationCode(d.CatchUp)))
	}
	if d.Step != 0 {
		fields = append(fields, jen.Id("Step").Op(":").Add(step))
	}
	return jen.Qual(RuntimePath, "Schedule").Values(fields...)
}

// registerAll emits RegisterAll: every registration, in source order,
// without blocking, through runtime.StartAll, which stops the ones started,
// newest first, on the first failure (G3).
func (e *emitter) registerAll() {
	f, m := e.f, e.m
	for _, line := range wrap(e.allDoc(), 77) {
		f.Comment(line)
	}
	reg := jen.Qual(RuntimePath, "Registration")
	sig := func() *jen.Statement { return jen.Func().Params().Params(reg.Clone(), jen.Error()) }
	f.Func().Id("RegisterAll").ParamsFunc(func(g *jen.Group) {
		g.Id(e.local["c"]).Op("*").Qual(RuntimePath, "Client")
		for _, r := range m.Receivers {
			g.Id(e.recv[r]).Add(e.recvType(r, r.Pointer))
		}
	}).Params(jen.Index().Add(reg.Clone()), jen.Error()).Block(
		jen.Return(jen.Qual(RuntimePath, "StartAll").CustomFunc(jen.Options{
			Open: "(", Close: ")", Separator: ",", Multi: true,
		}, func(g *jen.Group) {
			for _, t := range m.Tasks {
				args := []jen.Code{e.id("c")}
				if t.Recv != nil {
					arg := jen.Id(e.recv[t.Recv])
					if t.Recv.Pointer && !t.RecvPointer {
						arg = jen.Op("*").Add(arg)
					}
					args = append(args, arg)
				}
				g.Add(sig()).Custom(jen.Options{Open: "{ ", Close: " }"}, jen.Return(jen.Id(t.Register).Call(args...)))
			}
		})),
	)
}

// doc is the documentation of t's Register function.
func (e *emitter) doc(t *Task) string {
	d := t.Directive
	c := e.local["c"]
	name := t.Func.Name()
	var b strings.Builder
	if t.Partitioned() {
		parts := fmt.Sprintf("1 partition (lease %s.0)", d.Name)
		if d.Partitions > 1 {
			parts = fmt.Sprintf("%d partitions (leases %s.0 to %s.%d)", d.Partitions, d.Name, d.Name, d.Partitions-1)
		}
		fmt.Fprintf(&b, "%s starts %s on %s for the partition group %q of %s: for each partition that %s holds, it runs %s",
			t.Register, e.funcString(t), c, d.Name, parts, c, name)
	} else {
		fmt.Fprintf(&b, "%s starts %s on %s under the lease %q: while %s holds the lease, it runs %s",
			t.Register, e.funcString(t), c, d.Name, c, name)
	}
	if t.Source != nil {
		fmt.Fprintf(&b, " on each item that %s yields,", t.Source.Name())
	}
	switch {
	case d.Rate != 0:
		fmt.Fprintf(&b, " every %s", human(d.Rate))
	case d.Delay != 0:
		fmt.Fprintf(&b, " %s after the previous run ended", human(d.Delay))
	case d.Cron != "":
		zone := "UTC"
		if d.TZ != "" {
			zone = d.TZ
		}
		fmt.Fprintf(&b, " at the instants of the cron expression %q in %s (each slot at most once)", d.Cron, zone)
		if d.OverlapAfter {
			b.WriteString(", a slot that came during a run running when it returns")
		}
		if d.CatchUp != 0 {
			fmt.Fprintf(&b, ", a slot missed in a fail-over caught up if at most %s old", human(d.CatchUp))
		}
	default:
		b.WriteString(" once per term")
	}
	if d.Initial != 0 {
		fmt.Fprintf(&b, ", the first time %s after it is elected", human(d.Initial))
	}
	b.WriteString(".")
	if d.Step != 0 {
		fmt.Fprintf(&b, " A run starts only if the term stays valid for more than %s.", human(d.Step))
	}
	if t.Source != nil {
		if d.Step != 0 {
			fmt.Fprintf(&b, " Before each item, it checks again that the term stays valid for more than %s;", human(d.Step))
		} else {
			b.WriteString(" Before each item, it checks that the term is still valid;")
		}
		b.WriteString(" an item's error or a failed check ends the run.")
	}
	fmt.Fprintf(&b, " It does not block: stop the registration to hand the work over. The directive on %s:", name)
	return b.String()
}

func (e *emitter) allDoc() string {
	var names []string
	for _, t := range e.m.Tasks {
		names = append(names, e.funcString(t))
	}
	list := fmt.Sprintf("the %d annotated functions of this package", len(names))
	switch {
	case len(names) == 1:
		list = names[0]
	case len(names) <= 6:
		list = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return fmt.Sprintf("RegisterAll starts %s on %s, in source order, without blocking. If one fails to start, it stops those it started and returns the error.",
		list, e.local["c"])
}

func (e *emitter) funcString(t *Task) string {
	switch {
	case t.Recv == nil:
		return t.Func.Name()
	case t.RecvPointer:
		return "(*" + t.Recv.Named.Obj().Name() + ")." + t.Func.Name()
	}
	return t.Recv.Named.Obj().Name() + "." + t.Func.Name()
}

// durationCode writes d as a constant expression in the largest unit that
// divides it: 5 * time.Minute, time.Second, 1500 * time.Millisecond.
func durationCode(d time.Duration) *jen.Statement {
	if d == 0 {
		return jen.Lit(0)
	}
	units := []struct {
		name string
		d    time.Duration
	}{{"Hour", time.Hour}, {"Minute", time.Minute}, {"Second", time.Second},
		{"Millisecond", time.Millisecond}, {"Microsecond", time.Microsecond}, {"Nanosecond", time.Nanosecond}}
	for _, u := range units {
		if d%u.d == 0 {
			if d == u.d {
				return jen.Qual("time", u.name)
			}
			return jen.Lit(int(d/u.d)).Op("*").Qual("time", u.name)
		}
	}
	panic("unreachable")
}

// human writes d as time.Duration.String does, less its zero tails:
// 5m, 1h30m, 1m30s, 250ms.
func human(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// wrap breaks text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// lowerCamel returns a type name as a parameter name: Service → service,
// HTTPServer → httpServer, ID → id.
func lowerCamel(s string) string {
	runes := []rune(s)
	n := 0
	for n < len(runes) && unicode.IsUpper(runes[n]) {
		n++
	}
	switch {
	case n == 0:
		return s
	case n == 1 || n == len(runes):
		n = max(n, 1)
	default:
		n-- // HTTPServer: the S starts the next word
	}
	for i := range n {
		runes[i] = unicode.ToLower(runes[i])
	}
	if !utf8.ValidString(s) {
		return s
	}
	return string(runes)
}
