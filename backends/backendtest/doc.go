// Package backendtest is the conformance suite of Simba backends: every
// implementation of package backends — memory, PostgreSQL, Redis, ZooKeeper,
// or your own — runs it against a real store and passes it. It works like
// testing/fstest: one call, [Run], runs one named subtest per contract, each
// commented with the rules of docs/design.md it checks (S for sessions, T for leases and
// tokens, F for fencing tokens, §12 for the backend contract, §15 for the
// amnesia guard). A second call, [RunEngine], runs the engine (package
// runtime) end to end on the backend, with fault scenarios; a third,
// [RunContention], has many nodes contend on it for a few seconds while
// leaders hand over and links are cut; and three
// benchmarks every backend shares, [BenchmarkAcquireRelease],
// [BenchmarkKeepAlive] and [BenchmarkHandOff], measure it the same way
// beside its store's own floor ([BenchHarness]).
//
// Rule names such as S3 or T2, and sections such as §12, refer to
// docs/design.md in the repository.
//
// # Using it
//
// A backend's own tests describe it with a [Harness] and call [Run]:
//
//	func TestConformance(t *testing.T) {
//		addr := os.Getenv("SIMBA_TEST_REDIS") // the repository's tests' variable
//		if addr == "" {
//			t.Skip("SIMBA_TEST_REDIS not set")
//		}
//		backendtest.Run(t, backendtest.Harness{
//			New: func(t *testing.T) backends.Backend {
//				b := newBackendWithPrefix(t, addr, t.Name()) // isolated per case
//				t.Cleanup(func() { b.Close() })
//				return b
//			},
//			TTL:      time.Second,
//			MaxLease: 3 * time.Second,
//			ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
//				deleteSessionKey(t, b, id)
//			},
//		})
//	}
//
// New must return a store isolated from every other one it returned (a new key
// prefix, schema, chroot or in-process store), since the cases run in
// parallel and use fixed lease names. TTL is the unit of every wait: with
// 1–3 s against a real server the whole suite takes a few TTLs, because the
// cases that wait for expiries run in parallel.
//
// The hooks are optional: ExpireSession acts on a backend from New;
// NewRestartable, NewDurable and NewCuttable construct a backend of their own
// (on a private server the case may restart, with its data lost or kept, or
// behind a proxy it may cut) with the function that injects the fault. A
// case that needs a missing hook is skipped, and its skip message names the
// hook, so `go test -v` shows what was not checked; so is a case for an
// optional ability (backends.Notifier, backends.StoreClock,
// backends.Inspector, io.Closer) the backend lacks. Under
// SIMBA_REQUIRE_SERVICES=1 ([RequireEnv], which `make test` sets) such a case
// fails instead, unless the harness lists it in Skip with the reason: a hook
// forgotten or dropped fails CI rather than leaving a contract unchecked.
//
// # The engine on top
//
// [RunEngine] takes an [EngineHarness]: New, another node's backend on the
// same namespace (Same), a lease, and fault hooks — a node's [Path] to the
// store that a scenario cuts and slows (NewPath), and ExpireSession. Its
// scenarios start runtime clients as nodes: who leads, read and followed by
// a client that does not contend; Locks taking turns; a prompt graceful
// hand-off; the leader cut off; its replies and requests slowed; its session
// expired behind its back. Each checks, from every term its nodes held, that
// no two terms of a name were valid at once, that tokens rose in the order
// terms began, and that callbacks came in pairs (D3, T2, L1).
//
// # What it checks
//
// Sessions: open and keep-alive grant no more than asked, clamped to MaxLease
// (C2); a kept-alive session outlives its TTL (S1); ids are unique (S2); an
// expired session never comes back and cannot touch what others took over,
// even when its keep-alive races the takeover (S3); Close releases every
// lease and membership at once (S4); identities and TTLs are checked. Leases:
// tokens strictly increase per name and across names, and in term order when
// many sessions take turns on one name (T2, F5); Acquire is idempotent for the
// holder and refused with a *HeldError naming the holder for others, with
// exactly one winner among concurrent acquirers; any session reads a lease's
// holder; Release needs the holder and its token (T5); the keep-alive digest
// changes exactly when the held set changes, Owned agrees with it, and the
// replies to Acquire and Release carry it with the version one higher per
// change (S1, T4); values are written by the holder with its token, outlive
// terms and are bounded by MaxValueSize; calls with an ended context return
// at once; a closed Backend refuses every call (ErrClosed). Groups: members and
// partition holders, the group epoch in the digest, partition-count
// mismatches, membership dying with the session. Names: invalid names are
// rejected with ErrInvalidName (T1). With the hooks or abilities: watchers
// (A1), the store clock, the listing of an Inspector, the amnesia guard
// (§15), a durable store's restart, and unreachable stores (D2).
//
// Run imports only the standard library and package backends; RunEngine
// imports package runtime (whose own tests never import this package) and
// the repository's test kit.
package backendtest
