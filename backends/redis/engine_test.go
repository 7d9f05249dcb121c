package simbaredis

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/enginetest"
)

// The engine end to end on the real Redis: who leads, read and followed by
// a client that does not contend; a client's Locks taking turns.
func TestEngine(t *testing.T) {
	addr, admin := sharedRedis(t)
	enginetest.Run(t, enginetest.Harness{
		New:   func(t *testing.T) backends.Backend { return newBackend(t, newClient(t, addr), admin) },
		Lease: 2 * time.Second,
	})
}
