package runtime

import (
	"context"
	"errors"
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
// leaves nothing running. Generated RegisterAll functions call it.
func StartAll(starts ...func() (Registration, error)) ([]Registration, error) {
	regs := make([]Registration, 0, len(starts))
	for _, start := range starts {
		r, err := start()
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
