package fencing

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba/backends"
)

// Errors of fenced writes. Recipes return them wrapped with details; test
// them with errors.Is.
var (
	// ErrStaleToken reports a write rejected because its token is lower than
	// the highest token the resource has accepted: a newer term has written
	// since. The write changed nothing. Retrying it with the same token is
	// pointless; the caller's term is over.
	ErrStaleToken = errors.New("simba: stale fencing token")

	// ErrInvalidToken reports a token that no term can have: zero or
	// negative, or beyond what the recipe can store exactly (Redis: 2^53
	// and above). The write changed nothing.
	ErrInvalidToken = errors.New("simba: invalid fencing token")

	// ErrValueTooLarge reports a value larger than the recipe accepts. The
	// write changed nothing.
	ErrValueTooLarge = errors.New("simba: fenced value too large")
)

// DefaultMaxValueSize is the largest value, in bytes, that the PostgreSQL and
// Redis recipes accept unless configured otherwise.
const DefaultMaxValueSize = 1 << 20

// Resource is one value protected by fencing tokens: a row, a key, a file, an
// in-memory record. It is what the conformance kit in package fencingtest
// checks. Its methods are safe for concurrent use, by any number of
// processes.
type Resource interface {
	// Write stores value with token, in one atomic step, if token is not
	// lower than the highest token the resource has accepted, and records
	// token as the highest. An equal token is accepted (a retry, or another
	// write of the same term). A lower token is rejected with an error
	// wrapping [ErrStaleToken], and nothing changes. A token below 1 is
	// rejected with an error (recipes wrap [ErrInvalidToken]), and nothing
	// changes. Tokens are stored and compared exactly: every token below
	// 2^53 (backends issue no larger one) is accepted on these terms, and a
	// larger token that the resource cannot keep exactly (in a float64, a
	// Lua number, a JSON number) is rejected with an error wrapping
	// [ErrInvalidToken], and nothing changes. Any other error means the
	// outcome is unknown.
	Write(ctx context.Context, token backends.Token, value []byte) error

	// Read returns the value last accepted and the token it was written
	// with, which is the highest token accepted; nil and 0 if nothing was
	// written yet. Both come from one instant.
	Read(ctx context.Context) (value []byte, token backends.Token, err error)
}

// CheckToken returns an error wrapping [ErrInvalidToken] if token is not a
// token a term can have (below 1), and nil otherwise. Recipes call it before
// anything else.
func CheckToken(token backends.Token) error {
	if token < 1 {
		return fmt.Errorf("%w: %d; tokens are at least 1 (use the term's Token())", ErrInvalidToken, token)
	}
	return nil
}

// StaleError returns the error a recipe returns for a rejected write: it
// wraps [ErrStaleToken] and says which token lost to which. highest is 0 when
// the recipe does not know it.
func StaleError(token, highest backends.Token) error {
	if highest == 0 {
		return fmt.Errorf("%w: token %d is lower than the highest token accepted", ErrStaleToken, token)
	}
	return fmt.Errorf("%w: token %d is lower than the highest token accepted, %d", ErrStaleToken, token, highest)
}
