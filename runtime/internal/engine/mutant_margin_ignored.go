//go:build mutant_margin_ignored

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "margin-ignored"
