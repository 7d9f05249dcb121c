// Package bench compares Simba for Go with its peers side by side: our
// runtime on each of our backends, and etcd's concurrency Mutex and
// Election (on an etcd server embedded in the process), go-zookeeper's lock
// recipe, redsync and bsm/redislock, all through one harness, in one run, on
// one machine, with the same 2 s lease. It is a module of its own, so that
// none of the peers' dependencies reaches Simba's users. Run it from the
// repository's root with `make compare`, or:
//
//	cd bench && go run ./cmd/compare          # the full table, ~15 minutes
//	cd bench && go test -short ./...          # the smoke test, ~15 seconds
//
// Rule names such as H1 refer to docs/design.md in the repository.
//
// # Rows
//
// Each row is one [Impl] in [Impls]: a name, a store, its configuration in
// one line, and an Open function that connects a [Target]. A Target makes
// [Node]s — each with its own clients and connections, as a separate process
// would have — and the raw baseline of its store. Adding a backend or a peer
// is adding one entry (and its Target, in a file of its own). Each peer is
// configured as its documentation shows; the comment beside each Target
// says how and why.
//
// # What is measured, and how it is counted
//
// Every node's connections go through a [NodeNet]: a dialer (through
// internal/testkit/faultnet) that counts the requests written on the wire, framed
// per store (a RESP command, a ZooKeeper packet, a PostgreSQL query or
// Sync; etcd's gRPC requests and stream messages are counted by an
// interceptor), and that can blackhole the node.
//
//   - Graceful hand-off: two nodes; the waiter is blocked in its acquire
//     (given 150 ms to block — etcd brings a new watch up to date on a
//     100 ms loop — plus a random 0–100 ms so that the release falls
//     at any phase of a polling waiter's retry period); from the holder's
//     release call to the waiter's acquire returning. Median and p99 over
//     Options.HandOffs; the nodes swap roles after each. Beside it, the
//     store's raw pair (see acquire+release) timed after the same idle span,
//     before every fourth hand-off: round trips slow down after idling, and
//     a hand-off is at least two writes, so that is its floor.
//   - Crash fail-over: a new holder renews for one to two renewal periods,
//     a waiter blocks, and the holder is blackholed — connections open and
//     silent, nothing released, no more renewals, as a crashed process or a
//     dropped route; from the holder's last successful renewal (the reply
//     as the node saw it: our engine's renewal event, redislock's Refresh,
//     redsync's Extend, etcd's keep-alive reply, and for ZooKeeper, whose
//     server resets a session's timer on any packet, the last reply of any
//     kind) to the waiter's acquire returning, ÷ the lease.
//   - Requests per renewal: one idle node holding 1, 100 and 1,000 leases;
//     every request it sends over Options.Window renewal periods, starting
//     half a period after a renewal so that a periodic renewal is counted
//     exactly once per period, ÷ the periods. A period is the node's own
//     renewal interval: 667 ms (a third of the lease) for our runtime, the
//     polling locks' refresh loop and go-zookeeper's pings; etcd's client
//     picks its own (a third of the TTL after each reply, on a loop that
//     looks every 500 ms: about 1 s), so its count is per keep-alive sent. A
//     lock library that refreshes each lock on its own sends N.
//   - Acquire+release: sequential and uncontended on one node, each pair
//     followed by the raw pair of the same store on a connection of its own,
//     so that both see the same moment of the machine, after a warm-up;
//     Options.Rounds rounds, each taking every row in turn. The raw pair is
//     the least an acquire and a release can cost there: Redis SET NX PX and
//     DEL; etcd two Puts; ZooKeeper Create and Delete; PostgreSQL two
//     single-row conditional UPDATEs. On Redis, the server's CPU (INFO cpu,
//     user + system) and its per-command calls and time (INFO
//     commandstats, a script's inner commands under their own names) are
//     read around Options.Pairs more pairs on their own.
//
// Ratios — to the raw pair, to redislock — are of medians measured in the
// same run. The machine is noisy (two cores shared with other work; a round
// trip is 11–16 µs when client and server share a core, 70–85 µs when not):
// compare medians of several rounds, and read the rounds' spread printed
// beside each.
//
// The Redis rows run on a private redis-server started on a free loopback
// port (the same binary as the shared one), so that its counters count
// their own work only; without redis-server, on the shared Redis
// (SIMBA_TEST_REDIS). ZooKeeper and PostgreSQL are the shared servers
// (SIMBA_TEST_ZOOKEEPER, SIMBA_TEST_POSTGRES), each row in a path, prefix or
// schema of its own; etcd runs embedded, one member with its defaults, its
// data in a temporary directory.
package bench
