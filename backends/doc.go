// Package backends is the contract between the Simba engine and the stores that
// hold its sessions and leases, in the way database/sql/driver is the contract
// between database/sql and its drivers.
//
// A store (PostgreSQL, Redis, ZooKeeper, the in-process memory store) is
// reached through a [Backend], which opens [Session]s. A session is one node's
// liveness: it expires in the store unless it is kept alive, and everything it
// acquired or joined (leases, group memberships) dies with it. The engine in
// package runtime is the only intended caller; applications use runtime.
//
// This package imports only the standard library. Backends import it, runtime
// imports it, and neither imports the other.
//
// # Rules every backend follows
//
//   - One session per node, renewed with one call ([Session.KeepAlive]) whose
//     cost does not grow with the number of leases held (SPEC S1). The reply
//     carries a [Digest]; the full list ([Session.Owned]) is read only when the
//     digest is not what the engine expects.
//   - A session that expired never comes back (S3): every method of an
//     expired session returns an error wrapping [ErrSessionExpired], and a
//     call that reaches the store late can neither extend nor release what
//     another session now holds.
//   - Expiry is measured by the store, never by the client's wall clock (D1):
//     [Renewal.Remaining] is a duration measured by the store.
//   - Tokens are strictly increasing per lease name and never go back, even
//     when lease records are deleted or the store restarts (T2, F5, SPEC §15).
//   - A release carries its token and is a no-op unless the session holds that
//     very term (T5).
//   - Lease names follow [ValidateName] (T1) on every backend.
//
// Optional abilities are separate interfaces found by type assertion:
// [Notifier] (release notifications) and [StoreClock] (the store's time).
// A backend that can lose its state (a Redis without persistence, the memory
// store) implements the amnesia guard of SPEC §15 internally: after such a
// loss it refuses every acquisition until the longest lease it could have
// granted has passed, and its tokens stay strictly increasing.
//
// # Errors
//
// Methods return the sentinels below (wrapped with context where useful) for
// the outcomes the engine branches on, and wrap driver errors with %w. The
// engine treats any other error as "the store could not be reached".
//
// # How the stores fit this contract
//
// The contract was sketched against every store before it was settled:
//
//   - PostgreSQL: a session row with an expiry measured by now(), carrying the
//     digest counters; lease rows keyed by name, tokens from one sequence;
//     KeepAlive is one UPDATE … RETURNING (and reaps expired sessions, bumping
//     the epochs of their groups); releases NOTIFY a channel that a LISTEN
//     connection turns into [Notifier] calls.
//   - Redis: one Lua script per operation (EVALSHA); a session hash with its
//     expiry and digest counters, lease hashes that name their session, one
//     token counter per namespace, all keys under one hash tag; KeepAlive
//     reads the epochs of the few groups joined, never the leases; releases
//     are published on one channel.
//   - ZooKeeper: a Session is one ZooKeeper session (one connection); a lease
//     is an ephemeral node, its token the node's czxid; the digest is kept by
//     the backend from watches on the nodes it created, so KeepAlive is one
//     cheap read; values live in persistent nodes written with a multi-op that
//     checks the lease node; [Notifier] is an exists-watch.
//   - Memory: the same records in maps under one mutex, expiry measured by a
//     rate-adjustable clock, with fault controls for tests.
package backends
