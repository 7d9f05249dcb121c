//go:build mutant_drift_ignored

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "drift-ignored"
