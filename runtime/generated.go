package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SupportPackageIsVersion1 is referenced by code that simbagen generates, so
// that generated code fails to compile, right where it is, against a runtime
// too old for it (the convention of grpc-gateway's runtime).
const SupportPackageIsVersion1 = true

// Registration is something started on a client that can be stopped with
// the hand-off order: an [Election] (also a schedule) or a [Group].
// Generated Register functions return it.
type Registration interface {
	// Name returns the lease or group name.
	Name() string
	// Stop hands over what it holds and ends it; ctx bounds only the wait.
	Stop(ctx context.Context) error
	// StepDown hands over what it holds and sits out for cooldown.
	StepDown(ctx context.Context, cooldown time.Duration) error
}

var (
	_ Registration = (*Election)(nil)
	_ Registration = (*ScheduledTask)(nil)
	_ Registration = (*Group)(nil)
)

// StartAll calls each start function in order and returns what they
// started. If one fails, it stops those already started, newest first, and
// returns the error joined with any error of those stops: a failed StartAll
// leaves nothing running. A nil start function, or one that returns a nil
// Registration without an error, fails so, with an error matching
// [ErrNilArgument] that gives its position. Generated RegisterAll functions
// call it.
func StartAll(starts ...func() (Registration, error)) ([]Registration, error) {
	regs := make([]Registration, 0, len(starts))
	for i, start := range starts {
		var r Registration
		var err error
		switch {
		case start == nil:
			err = fmt.Errorf("simba: StartAll: start function %d of %d is nil: %w", i+1, len(starts), ErrNilArgument)
		default:
			if r, err = start(); err == nil && isNil(r) {
				err = fmt.Errorf("simba: StartAll: start function %d of %d returned a nil Registration (%T) and no error: %w",
					i+1, len(starts), r, ErrNilArgument)
			}
		}
		if err != nil {
			for i := len(regs) - 1; i >= 0; i-- {
				err = errors.Join(err, regs[i].Stop(context.Background()))
			}
			return nil, err
		}
		regs = append(regs, r)
	}
	return regs, nil
}
