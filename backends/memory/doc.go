// Package memory is an in-process store for Simba: the backend of the demo,
// of single-binary tools and of tests, and the substrate of the engine's
// simulator. It implements the contract of package backends in full and
// passes the same conformance suite (package backendtest) as the PostgreSQL,
// Redis and ZooKeeper backends.
//
// Rule names such as S3 or §15 refer to docs/design.md in the repository.
//
// # Use
//
//	private := memory.New()     // a store of its own
//	shared := memory.Open("")   // the process-wide default store ("memory:")
//	jobs := memory.Open("jobs") // a process-wide named store ("memory:jobs")
//
// Every session opened from one [Store] is a separate node, so several clients
// in one process contend exactly as several processes would against a shared
// server. A store lives as long as the process: it has no Close, and it owns
// no goroutines, connections or files.
//
// # Semantics
//
// The store keeps the records a server would: sessions (an id of 128 random
// bits, an expiry, the leases held, the digest counters, the groups joined),
// leases (name → holder and token), values (name → bytes, kept after the
// lease is released, since values outlive terms) and groups (partition count,
// members, epoch). All of them live in maps under one mutex.
//
//   - Expiry is lazy: there is no background goroutine. Every call first reaps
//     the sessions whose expiry has passed, cheapest first from a min-heap by
//     expiry, so a call costs O(log n) per session it reaps and nothing extra
//     otherwise. A session that expired is gone: its late keep-alive fails
//     with [backends.ErrSessionExpired] like every other call (S3).
//   - Keep-alive costs O(groups joined), never O(leases held) (S1).
//   - Tokens come from one counter per store: each new token is the larger of
//     the last one plus one and the store clock in microseconds, so tokens
//     increase strictly per name and across names, and keep increasing after
//     a restart that lost the counter (T2, F5, §15) — unless the counter
//     had run ahead of the clock by more than MaxLease, which takes more than
//     one acquisition per microsecond sustained over MaxLease. Released lease
//     records are deleted; values are kept (one per name ever written, as
//     long as the store lives).
//   - A session records the identity it was opened with; [backends.Session.Holder]
//     and a refused acquisition ([backends.HeldError]) report it, with the
//     holder's token and remaining time. [Store.Inspect] lists every live
//     session, held lease and group ([backends.Inspector]); it changes
//     nothing, and unlike every other call does not even reap the sessions
//     that expired (it leaves them out), so that a status tool only reads.
//   - Session time to live is clamped to the store's MaxLease
//     ([WithMaxLease], default 60 s); the reply says what was granted (C2).
//   - Watchers ([backends.Notifier]) are called on the goroutine of the call
//     that released the lease, closed or expired the holder's session or
//     restarted the store, after the store's mutex is released; expiry is
//     noticed by the next call to the store, whoever makes it. Calls of one
//     watch never overlap, and its stop function waits for a call in
//     progress, so that none starts after it returns; fn must therefore not
//     call its own stop.
//
// # Time
//
// The store reads only the Go clock (time.Now and timers), so it runs
// unchanged inside a testing/synctest bubble, in virtual time. A store must be
// used inside the bubble that created it, or outside every bubble; tests in
// bubbles use [New], not the process-wide stores of [Open].
//
// The store has its own wall clock, the store clock: the Go clock's wall time
// when the store was made, plus the monotonic time elapsed since, times a rate
// (1 unless [WithClockRate] or [Faults.SetClockRate] says otherwise). Expiry is
// measured on it, [backends.Renewal.StoreTime] and [Store.StoreTime] read it,
// and [backends.Renewal.Remaining] is the session's expiry minus it. A rate
// other than 1 simulates a store whose clock runs faster or slower than the
// client's (D3).
//
// # The amnesia guard
//
// A store that loses its state while clients still believe they hold leases
// must not hand those leases out at once (§15). After
// [Faults.Restart], which simulates a restart of the store's process with all
// state lost, the store refuses every acquisition with a
// *[backends.RecoveringError] (matching [backends.ErrRecovering] and
// [backends.ErrLeaseHeld]) that says until when, on the store clock, and that
// a shorter [WithMaxLease] shortens the wait, until MaxLease has passed on
// the store clock — by then every old holder's local deadline has passed,
// since no session was granted more. Sessions may be opened during the
// guard. [Store.RunID] changes at every restart, so that a client can tell a
// restarted store from one that only seems slow. The store has no logger:
// the refusal is all it says.
//
// A store made by [New] or [Open] starts without a guard, and this is the one
// store that can prove no earlier grant exists: its state lives and dies with
// the process, and so do its clients, so when the process (and so the store)
// starts anew, no holder of the old store's leases survives it — no session
// of it can be renewed, and no client of it is left to believe in a term.
// Its tokens still exceed those of the previous process — which a protected
// resource outside the process may have recorded — because they are floored
// by the wall clock in microseconds, unless the host's clock stepped back in
// between.
//
// # The fault surface (test support, not for production use)
//
// [Store.Faults] returns the store's fault controls and call counters. They
// exist for tests and the simulator, to make the store misbehave as real
// stores do:
//
//   - [Faults.SetReachability]: [Refuse] fails every call at once with an
//     error wrapping [backends.ErrUnavailable]; [Blackhole] makes every call
//     hang until its context ends, then fail with an error wrapping both
//     ErrUnavailable and the context's error. The store never sees the call.
//   - [Faults.SetLatency]: separate request and reply delays, so that the store
//     can handle a renewal promptly while its reply arrives late (D1, D4).
//     A delay is cut short when the call's context ends.
//   - [Faults.ExpireSession]: expire a session behind its client's back.
//   - [Faults.Restart]: lose all state and start the amnesia guard.
//   - [Faults.SetClockRate]: change the store clock's rate without a jump.
//   - [Faults.Calls] and [Faults.ResetCalls]: count calls per method, so that a
//     test or benchmark can prove, for example, that a renewal is one call.
package memory
