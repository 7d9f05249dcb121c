// Package sessionid makes the session ids of the backends whose stores do not
// number sessions themselves: 128 random bits in hex, never reused (S2).
//
// Rule names such as S2 refer to docs/design.md in the repository.
package sessionid

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/simba-go/simba/backends"
)

// New returns a new session id: 128 random bits as 32 lowercase hex digits.
func New() backends.SessionID {
	var id [16]byte
	rand.Read(id[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return backends.SessionID(hex.EncodeToString(id[:]))
}
