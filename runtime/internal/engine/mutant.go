package engine

// Mutant names the deliberately broken variant this build runs, "" for the
// real engine (see mutant_none.go), so that a simulator can say how to
// replay what it found.
const Mutant = mutant
