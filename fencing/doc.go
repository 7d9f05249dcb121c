// Package fencing protects a resource from a stale lease holder (§7), and
// keeps a leader's writes to the services and databases downstream within
// its term.
//
// Rule names such as F1, and sections such as §7, refer to docs/design.md in
// the repository.
//
// A term's validity is only a hint for when to start a step: a process can
// pause right after checking it, and resume after another node has taken the
// lease over. Only the resource itself can refuse the stale holder's write,
// and it needs the term's fencing token to do so (F1):
//
//   - every write carries the token of the term it belongs to
//     (term.Token(), a [backends.Token]);
//   - the resource accepts a write only if its token is not lower than the
//     highest token it has accepted, and records that token with the value;
//   - equal tokens are accepted: retries within one term carry the same
//     token;
//   - the check and the write are one atomic step (F2). Reading the highest
//     token and then writing lets a stale holder pass the check and land its
//     write after a newer holder's.
//
// # Recipes
//
// Three recipes implement these rules (F3), each checked by the conformance
// kit in package [github.com/simba-go/simba/fencing/fencingtest]:
//
//   - [Guard] and [Cell], in this package: in-process state whose check and
//     write run under one mutex.
//   - package [github.com/simba-go/simba/fencing/pgfence]: a row per resource
//     in a PostgreSQL table, written with one conditional
//     UPDATE … WHERE id = $1 AND fencing_token <= $2.
//   - package [github.com/simba-go/simba/fencing/redisfence]: a Lua script
//     that compares and sets the token and the value of one resource in one
//     step, both keys under one hash tag so that it works on Redis Cluster.
//
// Your own resource fits the small [Resource] interface; run
// fencingtest.Run on it to check that it is fenced.
//
// # Write gates
//
// Most writes a leader makes go to an HTTP service or a database through a
// driver, which check no token of ours. A [Gate] stands in front of them in
// the leader's process: a write starts only while the term stays valid for
// more than Gate.Min (E1), and a write still running when the term ends is
// cancelled, its context with it. The error of either matches
// [ErrGateClosed] and wraps the term's reason; a *[GateError] tells a write
// refused (nothing was sent) from one cancelled in flight (its outcome is
// unknown). The gate takes the small [Term] interface, which runtime's
// terms satisfy; build one gate per term.
//
//   - [Transport], an http.RoundTripper: writes are requests whose method is
//     not GET, HEAD, OPTIONS or TRACE, unless a predicate of yours says
//     otherwise; it can send the term's sequencer with each write.
//   - [Connector], a database/sql/driver.Connector for sql.OpenDB: Exec, the
//     statements of a transaction that is not read-only and its commit are
//     writes; Query is a read. It documents the limits of telling a read from
//     a write.
//   - [Gate.Do], for any other call that takes a context.
//
// [AsRead] and [AsWrite] mark a call as what it is when the method or the
// call does not say it.
//
// A gate narrows the window in which a former leader writes; it cannot close
// it (E2). A request already on the wire, a COMMIT the database has
// received, or a process paused between the gate's check and its send, all
// land after the term ended. The resource's check of the token closes the
// window (F1): send the token, or the sequencer, with the write, and have
// the resource refuse stale ones.
//
// # Sequencers
//
// A [Sequencer] is a term's lease name and token as one opaque string,
// "simba-seq/1 lease report 1796029244739692", for a service downstream of
// the leader to check, as Chubby's sequencers are. runtime's terms give
// theirs; [ParseSequencer] reads one back, and refuses, with an error naming
// the problem, anything that would not print back the same.
//
// [Sequencers] is the downstream service's guard: per lease name, the
// highest token admitted. A lower token is refused with [ErrStaleToken], an
// equal one admitted, a higher one recorded (F1). [Sequencers.Do] runs the
// work of a request so that no work under a lower token runs alongside or
// after work under a higher one of the same name (F2): admitting a higher
// token cancels the older work and waits until it has returned.
//
// Over HTTP the sequencer travels in the [SequencerHeader] header
// ([SetSequencer], [SequencerFrom]; [Transport] sends it when asked), and
// [SequencerHandler] is the middleware that checks it: a stale sequencer gets
// 409 Conflict, a malformed one 400, a write without one 428. Other
// transports carry the string as they carry any other metadata.
//
// This package imports only the standard library and package backends; the
// recipes that need a driver live in packages of their own.
package fencing
