// Package vocab holds the words the runtime's engine and its public API
// share: why a term ended ([Reason]), the session's state
// ([SessionState]), what a client does about a lease ([Role]), the events
// it reports ([EventKind], [Event]), its snapshot ([Snapshot] and the
// status entries in it), its timing knobs ([Config]) with the local-deadline
// formula ([LocalValidity]), and when a schedule runs ([Schedule]).
//
// Each is declared here once: package runtime re-exports it under the same
// name with an alias (type Reason = vocab.Reason), and runtime/internal/engine
// uses it directly, so adding an event kind, a reason or a field touches
// this package only. The package is pure, as the engine is: no goroutines,
// clocks or I/O (the engine's purity test parses it too).
//
// Rule names such as D1 or T4, and sections such as §13, refer to
// docs/design.md in the repository.
package vocab
