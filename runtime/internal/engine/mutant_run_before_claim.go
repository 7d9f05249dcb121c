//go:build mutant_run_before_claim

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "run-before-claim"
