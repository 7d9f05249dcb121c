package engine

import (
	"errors"

	"github.com/simba-go/simba/backends"
)

// Sentinel errors the core returns; the runtime re-exports them.
var (
	// ErrClosed reports an input for a client that is closing or closed.
	ErrClosed = errors.New("client closed")

	// ErrNameInUse reports a name already started on this client by an
	// election, a lock, a schedule or a partition group (L8).
	ErrNameInUse = errors.New("name already in use on this client")

	// ErrNotMade is the result a driver gives a request it did not make
	// because the core no longer wanted it (see [Machine.Wanted]).
	ErrNotMade = errors.New("the call was not made: the client no longer wanted it")
)

// heldHere is the error of a TryLock while another Lock of this client holds
// or awaits the lease: it matches backends.ErrLeaseHeld.
type heldHere struct{}

func (heldHere) Error() string        { return "held by another Lock of this client" }
func (heldHere) Is(target error) bool { return target == backends.ErrLeaseHeld }
