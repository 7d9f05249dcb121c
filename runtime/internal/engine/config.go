package engine

import (
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// localValidity is how long a grant of remaining is trusted locally (D1):
// vocab.LocalValidity with the machine's configuration, which [New] takes
// as vocab.Effective gives it. Two mutants break it on purpose, for the
// simulator to catch (see mutant_none.go).
func (m *Machine) localValidity(remaining time.Duration) time.Duration {
	c := m.cfg
	if mutant == "drift-ignored" {
		c.Drift = 0
	}
	if mutant == "margin-ignored" {
		c.Margin = 0
	}
	return vocab.LocalValidity(c, remaining)
}
