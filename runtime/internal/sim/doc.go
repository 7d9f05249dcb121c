// Package sim is the engine's deterministic simulator, a test-only package:
// its tests drive several cores (runtime/internal/engine) with a seeded PRNG
// on virtual time against a simulated store with a clock rate of its own,
// inject message delay, loss, duplication and reordering, pauses longer than
// the lease, store restarts (durable and amnesiac, with the amnesia guard),
// early, duplicated and lost release broadcasts and shortened grants, and
// check on the simulator's true time that no two terms of one name are
// valid at once, that tokens strictly increase per name, that a fenced
// resource accepts no stale write, that callbacks pair, that a holder
// appears soon after the faults end, and, in the half of the runs where
// every node also runs a cron schedule (a timetable on the store's clock),
// that no slot's run starts twice unless an amnesiac store restart lost its
// claim in between (R2).
//
// Rule names such as L3 refer to docs/design.md in the repository.
//
// Every run is reproducible from its seed; a failing run prints the command
// that replays it:
//
//	go test ./runtime/internal/sim -run 'TestSim$' -seed=123 -v
//
// The flags: -sim.schedules (how many seeded schedules TestSim runs),
// -seed (replay one, with its trace), -sim.failfast (stop at the first
// violation, for the mutant runs). The mutants of the engine and of the
// simulated resource are built with -tags mutant_<name>
// (runtime/internal/engine/mutant_none.go lists them); TestMutantsCaught
// builds each and checks that the simulator fails it.
package sim
