package generator

import (
	"go/token"
	"go/types"

	"github.com/simba-go/simba/annotations"
)

// Model is what one package's simba_gen.go says, checked and ready to emit.
type Model struct {
	Pkg       *types.Package // the annotated package
	Output    string         // the file to write
	Tasks     []*Task        // in source order
	Receivers []*Receiver    // the receiver types of annotated methods, in order of first use
	// Constraint is the build constraint of the files of the annotated
	// functions, which the generated file carries on its //go:build line;
	// "" if they have none.
	Constraint string
}

// Task is one annotated function and what its registration does.
type Task struct {
	Directive *annotations.Directive // the parsed directive
	Text      string                 // the directive as written
	Pos       token.Position         // of the directive
	Func      *types.Func            // the annotated function or method
	Register  string                 // the generated registration function's name
	// Constraint is the build constraint of the function's file, "" if
	// none (see [Model.Constraint]).
	Constraint string

	// Recv is the receiver type of a method, nil for a function.
	Recv *Receiver
	// RecvPointer tells whether the method's receiver is a pointer.
	RecvPointer bool

	// Typed steps (G2): the item type, the source, and how it yields.
	Item           types.Type  // nil without items=
	Source         *types.Func // the function items= names, nil without items=
	SourceIsMethod bool        // a method of Recv, rather than a function
	SourceSlice    bool        // returns ([]T, error), rather than iter.Seq2[T, error]
}

// Receiver is a type whose methods are annotated.
type Receiver struct {
	// Named is the receiver's type, without the pointer.
	Named *types.Named
	// Pointer tells whether RegisterAll takes a pointer: true if any of
	// the annotated methods has a pointer receiver.
	Pointer bool
	// Names are the receiver names that the annotated methods declare,
	// in order, without duplicates or blanks: the generated parameter's
	// names if the type's own is taken.
	Names []string
}

// Partitioned reports whether t is a //simba:partitioned task.
func (t *Task) Partitioned() bool { return t.Directive.Kind == annotations.Partitioned }
