// Package storeerr wraps the errors of store drivers the same way in every
// backend: an error that means the store could not be reached, did not
// answer in time or refused to serve wraps backends.ErrUnavailable, the
// driver's error, and the call's context error when the context ended.
package storeerr

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba/backends"
)

// Unavailable wraps err, the driver's error for operation op of the backend
// whose errors start with prefix. If ctx ended, the result wraps ctx.Err()
// too, since drivers often report a deadline they turned into a socket
// timeout as an i/o error that does not wrap it.
func Unavailable(ctx context.Context, prefix, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%s: %s: %w: %w: %w", prefix, op, backends.ErrUnavailable, ctxErr, err)
	}
	return fmt.Errorf("%s: %s: %w: %w", prefix, op, backends.ErrUnavailable, err)
}
