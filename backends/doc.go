// Package backends is the contract between the Simba engine and the stores that
// hold its sessions and leases, in the way database/sql/driver is the contract
// between database/sql and its drivers.
//
// Rule names such as S1 or B2, and sections such as §15, refer to
// docs/design.md in the repository.
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
//     cost does not grow with the number of leases held (S1). The reply
//     carries a [Digest]; the full list ([Session.Owned]) is read only when the
//     digest is not what the engine expects.
//   - A session that expired never comes back (S3): every method of an
//     expired session returns an error wrapping [ErrSessionExpired], and a
//     call that reaches the store late can neither extend nor release what
//     another session now holds.
//   - Expiry is measured by the store, never by the client's wall clock (D1).
//   - Tokens are strictly increasing per lease name and never go back, even
//     when lease records are deleted or the store restarts (T2, F5, §15).
//   - A release carries its token and is a no-op unless the session holds that
//     very term (T5).
//   - Lease names follow [ValidateName] (T1) on every backend, identities
//     [ValidateIdentity].
//   - Any session can read the holder of any lease ([Session.Holder]), and a
//     refused acquisition says who holds it ([HeldError]).
//
// # The digest
//
// A [Digest] lets a keep-alive say "nothing changed" in a few integers:
//
//   - Leases is the number of leases the session holds.
//   - Version increases by exactly one with each lease the session acquires
//     or releases, and by nothing else. Replies to [Session.Acquire] and
//     [Session.Release] carry the digest right after their own change (or,
//     for a no-op, the unchanged digest), so a node that knows the version
//     before its change, and sees it one higher, knows the whole set without
//     reading it; any other step means someone else changed the set (a store
//     that lost state, an operator), and the engine reads [Session.Owned].
//   - Groups is compared only for equality. It changes whenever a group the
//     session joined changes: a member joins, leaves or ends, or one of its
//     partitions changes holder (B3: it may also change when nothing did,
//     which only costs the engine a [Session.Members] read; it must never stay
//     equal when something changed). Stores keep it as the largest of the
//     joined groups' epochs, each a store-wide revision taken at the group's
//     last change, and of the session's own membership revision, taken at
//     its last leave.
//
// # Rules for stores that renew sessions by themselves
//
// Some stores do not measure a session's remaining time, or renew sessions
// without being asked (ZooKeeper's client pings the server every third of
// the session timeout). They fit the contract by these rules, which the
// memory, Redis and PostgreSQL backends satisfy trivially:
//
//   - B1: [Renewal.Remaining] is a lower bound, counted from when the call
//     was sent, on how long the store keeps the session. A store that does
//     not report it returns a conservative bound derived from the negotiated
//     timeout, less what it knows the store may lag (a ZooKeeper follower
//     forwards session touches to the leader only every half tick; a follower
//     cut off from the quorum may keep answering for a while).
//   - B2: a session is renewed only by [Session.KeepAlive], whatever the
//     driver does by itself: when no KeepAlive has succeeded for Remaining
//     since the last one was sent, the backend closes the session itself, so
//     that its leases are freed and it never comes back (S3).
//   - B3: [Digest.Groups] may change when nothing changed; it never stays
//     equal when something did.
//   - B4: the token check of [Session.Release] and [Session.PutValue] may be
//     made by the session itself where the store can check the holder but
//     not the token (ZooKeeper's check compares a data version, not a
//     creation zxid), relying on the store's order of one session's
//     requests.
//   - B5: [StoreClock] may need an open session and may fail with
//     [ErrUnavailable]; a store clock may be coarse or step when the store's
//     leader changes. Schedules record slots by number, so such a clock can
//     delay a slot but never run a recorded one twice.
//   - B6: an operation is one round trip unless its documentation says
//     otherwise (ZooKeeper's acquire may be two pipelined calls).
//
// Optional abilities are separate interfaces found by type assertion:
// [Notifier] (release notifications), [HolderNotifier] (every change of a
// lease's holder, for watchers: memory, Redis, PostgreSQL), [StoreClock] (the
// store's time) and [Inspector] (a read-only listing for status tools). A backend that can lose
// its state (a Redis without persistence, the memory store) implements the
// amnesia guard of §15 internally: after such a loss it refuses every
// acquisition until the longest lease it could have granted has passed, and
// its tokens stay strictly increasing. The refusal is a *[RecoveringError]
// saying why and until when, and the backend logs it once per guard period.
//
// # Errors
//
// Methods return the sentinels below (wrapped with context where useful) for
// the outcomes the engine branches on, and wrap driver errors with %w. The
// engine treats any other error as "the store could not be reached".
//
// # How the stores fit this contract
//
//   - PostgreSQL: a session row with an expiry measured by the database's
//     clock (clock_timestamp(), read after the session's row is locked),
//     carrying the digest counters; lease rows keyed by name, tokens from one
//     sequence taken after the lease row is locked; every operation one
//     statement; releases NOTIFY a channel that a LISTEN connection turns into
//     [Notifier] calls, and grants of names a backend follows (an advisory
//     lock) notify it too, for [HolderNotifier].
//   - Redis: one Lua script per operation (EVALSHA); a session hash with its
//     expiry and digest counters, lease hashes that name their session, one
//     token counter per namespace, all keys under one hash tag; KeepAlive
//     reads the epochs of the few groups joined, never the leases; releases
//     are published to the waiting backends' channels, and grants and ends
//     of terms of followed names to their followers'.
//   - ZooKeeper: a Session is one ZooKeeper session (one connection); a lease
//     is an ephemeral node, its token the node's czxid; KeepAlive is a write
//     to a per-session node whose children are the leases held, so its Stat
//     is the digest; values live in persistent nodes written with a multi-op
//     that checks the lease node; [Notifier] is an exists-watch.
//   - Memory: the same records in maps under one mutex, expiry measured by a
//     rate-adjustable clock, with fault controls for tests.
package backends
