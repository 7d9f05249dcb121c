package runtime

import (
	"context"
	"fmt"
	"reflect"
)

// Misuse of the API — a nil context, a nil function, a nil or typed-nil
// backend, a nil registration — is refused on the caller's goroutine with
// an error matching [ErrNilArgument] that names the call and the argument.
// None reaches a goroutine of the client's, where a panic would end the
// process (a nil context given to WatchHolder did).

// checkContext refuses a nil ctx for the call op.
func checkContext(op string, ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("simba: %s: nil context: %w", op, ErrNilArgument)
	}
	return nil
}

// isNil reports whether v is nil, or an interface holding a nil pointer,
// map, slice, channel or function (a typed nil): calling a method on it
// would panic on whichever goroutine made the call.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
