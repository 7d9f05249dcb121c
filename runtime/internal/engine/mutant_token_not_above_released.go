//go:build mutant_token_not_above_released

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "token-not-above-released"
