//go:build mutant_unbounded_backoff

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "unbounded-backoff"
