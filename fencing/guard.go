package fencing

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/simba-go/simba/backends"
)

// errNilGuard is returned by the methods of a nil *Guard or *Cell.
var errNilGuard = errors.New("simba: fencing: nil Guard or Cell")

// Guard fences in-process state: [Guard.Do] checks the token and runs the
// write under one mutex, so no write with a lower token can start after a
// higher one was accepted (F1, F2). Use it when the protected state
// lives in this process — a cache, a file this process alone writes, the
// state of a single-binary tool — and wrap every write to that state in Do.
//
// The zero Guard is ready to use, with no token accepted yet. A Guard must
// not be copied after first use.
type Guard struct {
	mu      sync.Mutex
	highest backends.Token
}

// Do runs write if token is not lower than the highest token accepted so
// far, holding the guard's mutex throughout, and records token if write
// returns nil. If token is lower, it returns an error wrapping
// [ErrStaleToken] without calling write; a token below 1 gives an error
// wrapping [ErrInvalidToken]. An error from write is returned as is, and
// token is not recorded.
//
// write must not call the Guard: it would deadlock.
func (g *Guard) Do(token backends.Token, write func() error) error {
	if g == nil {
		return errNilGuard
	}
	if err := CheckToken(token); err != nil {
		return err
	}
	if write == nil {
		return errors.New("fencing: Guard.Do: nil write function")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if token < g.highest {
		return StaleError(token, g.highest)
	}
	if err := write(); err != nil {
		return err
	}
	g.highest = token
	return nil
}

// Highest returns the highest token accepted so far, 0 if none.
func (g *Guard) Highest() backends.Token {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}

// Cell is an in-process fenced value: a [Resource] kept in memory, built on a
// [Guard]. It is the simplest correct Resource, for single-process tools and
// tests. The zero Cell is empty and ready to use; a Cell must not be copied
// after first use.
type Cell struct {
	guard Guard
	value []byte // written only under guard.mu
}

var _ Resource = (*Cell)(nil)

// Write stores a copy of value with token, as [Resource] describes. The
// context is not used: the write does not block for long.
func (c *Cell) Write(_ context.Context, token backends.Token, value []byte) error {
	if c == nil {
		return errNilGuard
	}
	return c.guard.Do(token, func() error {
		c.value = slices.Clone(value)
		return nil
	})
}

// Read returns a copy of the value last accepted and its token; nil and 0 if
// none was.
func (c *Cell) Read(context.Context) ([]byte, backends.Token, error) {
	if c == nil {
		return nil, 0, errNilGuard
	}
	c.guard.mu.Lock()
	defer c.guard.mu.Unlock()
	return slices.Clone(c.value), c.guard.highest, nil
}
