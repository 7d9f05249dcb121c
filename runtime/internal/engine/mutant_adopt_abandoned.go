//go:build mutant_adopt_abandoned

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "adopt-abandoned"
