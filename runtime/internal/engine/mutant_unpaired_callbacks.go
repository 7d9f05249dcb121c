//go:build mutant_unpaired_callbacks

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "unpaired-callbacks"
