// Package check validates the arguments of backend operations the same way in
// every backend, so that a bad name, value, group or session option gets the
// same error, naming the input and what was expected, whichever store is
// behind it.
package check

import (
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
)

// Args checks the arguments of one backend's operations; its prefix starts
// every error ("simbaredis", "memory").
type Args struct {
	prefix string
}

// For returns the checks of the backend whose errors start with prefix.
func For(prefix string) Args { return Args{prefix: prefix} }

// Name checks a lease or group name (backends.ValidateName) for operation
// op ("acquire", "release", …).
func (a Args) Name(op, name string) error {
	if err := backends.ValidateName(name); err != nil {
		return fmt.Errorf("%s: %s: %w", a.prefix, op, err)
	}
	return nil
}

// Group checks a group name and partition count (backends.ValidateGroup).
func (a Args) Group(op, group string, partitions int) error {
	if err := backends.ValidateGroup(group, partitions); err != nil {
		return fmt.Errorf("%s: %s: %w", a.prefix, op, err)
	}
	return nil
}

// Value checks the name and the size of a value to store with PutValue.
func (a Args) Value(op, name string, value []byte) error {
	if err := a.Name(op, name); err != nil {
		return err
	}
	if len(value) > backends.MaxValueSize {
		return fmt.Errorf("%s: %s %q: %d bytes; want at most %d: %w",
			a.prefix, op, name, len(value), backends.MaxValueSize, backends.ErrValueTooLarge)
	}
	return nil
}

// Session checks the options of OpenSession: a TTL of at least min, and a
// valid identity.
func (a Args) Session(opts backends.SessionOptions, min time.Duration) error {
	if opts.TTL < min || opts.TTL <= 0 {
		return fmt.Errorf("%s: open session: TTL %v; want at least %v", a.prefix, opts.TTL, max(min, time.Nanosecond))
	}
	if err := backends.ValidateIdentity(opts.Identity); err != nil {
		return fmt.Errorf("%s: open session: %w", a.prefix, err)
	}
	return nil
}
