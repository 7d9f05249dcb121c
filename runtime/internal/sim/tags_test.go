package sim

import (
	"strings"

	"github.com/simba-go/simba/runtime/internal/engine"
)

// buildTag returns the mutant build tag of this build, "" for none.
func buildTag() string {
	switch {
	case mutant != "":
		return "mutant_read_then_write"
	case engine.Mutant != "":
		return "mutant_" + strings.ReplaceAll(engine.Mutant, "-", "_")
	}
	return ""
}
