//go:build mutant_deadline_arrival

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "deadline-arrival"
