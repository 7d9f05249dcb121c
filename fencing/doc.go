// Package fencing protects a resource from a stale lease holder (§7).
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
// This package imports only the standard library and package backends; the
// recipes that need a driver live in packages of their own.
package fencing
