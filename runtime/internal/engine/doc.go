// Package engine is the deterministic core of the runtime: sessions,
// candidates, terms, hand-off, schedules and partition groups as one state
// machine, in the shape of etcd's raft package. The runtime package keeps
// the public API and a thin driver that performs the core's effects on real
// goroutines, clocks and backends.
//
// Rule names such as D1 or H2, and sections such as §13, refer to
// docs/design.md in the repository.
//
// # The contract
//
// The core has no goroutines, reads no clock, sleeps on no timer and does
// no I/O; its only randomness (the candidates' retry jitter) comes from the
// seed given to [New]. Every input carries its time, a [Mono] on the
// driver's monotonic clock; the core answers with effects, in the order they
// must be performed, and the time it next needs a [Machine.Tick]. Given the
// same inputs at the same times and the same seed it makes the same
// decisions, byte for byte (describe.go prints them), so that a simulator
// can drive several machines through many seeded schedules on virtual time.
// purity_test.go parses the package, the vocabulary it shares with the
// runtime (runtime/internal/vocab) and the schedule record it reads and
// writes (internal/schedulerecord), and fails on a go statement, a clock
// read, a timer, an unseeded random number, or an import of sync, context,
// os or net.
//
// # Inputs, effects, answers
//
//	input (Step)       what the core does                          effects
//	Start              registers a contender, contends             EffSend(acquire)
//	StartGroup         registers a group, joins it                 EffSend(join)
//	Stop, StopGroup    hand-off in the order of H1                 EffTermEnded, EffSend(release), EffDispatch, EffComplete
//	Unlock, Abandon    a lock's stop, a Lock's caller gone         as Stop
//	Close              stops everything, closes the session (S4)   as Stop, EffSend(close), EffShutdown
//	Reply              a backend call's answer                     any (a refused acquire: EffWatch)
//	Released           a release notification (A1)                 EffSend(acquire, members)
//	TaskDone, RunDone  a task or scheduled run returned            EffSend(release, put value), EffEvent
//	CallbackDone       a callback ran (L2, L3)                     EffComplete
//	DispatchFailed     an elected callback had no goroutine (L6)   EffTermEnded, EffSend(release)
//	Tick (no input)    deadlines (D4), renewals (S1, C3), timers   EffSend(keep-alive, open), EffStartRun, EffStartTask
//
// The driver answers each EffSend with a Reply, each EffDispatch with a
// CallbackDone or a DispatchFailed, each EffStartTask with a TaskDone and
// each EffStartRun with a RunDone; it keeps the ids the core names
// (ContenderID, GroupID, TermID, Waiter) and maps them to its own objects;
// and it reads state only through the query methods of status.go.
//
// # Files
//
// One file per concept: session.go (opening, renewal, back-off, the digest
// check, the store's clock), candidate.go (contenders and their attempts),
// term.go (adoption, revocation, callbacks), handoff.go (stop, step-down,
// release, unlock), schedule.go (the run planner and its record),
// group.go and balance.go (partition groups), timers.go, close.go,
// status.go (queries, and the runtime's Snapshot), inputs.go, effects.go,
// config.go (the local validity), errors.go, and describe.go (one line of
// text per input and effect, for golden traces). The words the core shares
// with the runtime's API — Reason, SessionState, Role, Event, Config,
// Schedule and the status types — are declared once, in package vocab; the
// core uses them as they are, and the runtime re-exports them.
package engine
