// Package faults runs seeded fault schedules against real node processes
// that contend for leases on each landed server backend — Redis,
// PostgreSQL, ZooKeeper and etcd (the memory store lives in one process, so
// it has no place here) — and checks, from what the processes themselves
// logged, that no two of them ever held one lease at once, that fencing
// tokens only grow, and that the fenced resource never accepted a stale
// write. Everything is in the package's tests; `make test` runs it.
//
// Rule names such as H1 refer to docs/design.md in the repository.
//
// # Processes
//
// A node is the test binary started again (os.Args[0]) with SIMBA_FAULTS_NODE
// set: TestMain sees it and runs the node instead of the tests, as Go's
// os/exec tests do. A node opens its backend from a URL (package
// backendurl), runs a runtime.Client with a lease of -faults.lease (1.5 s),
// and contends for the schedule's two names with RunWhileLeader. Each node
// reaches the server through a proxy of its own (toxiproxy, as a library, in
// the test process), so that a fault can hit one node's connections alone.
// Every schedule runs on a server the test started for itself
// (internal/testkit/testservers: StartRedisServer, StartPostgres, StartZooKeeper,
// StartMariaDB; etcd is a member embedded in the test process, etcd_test.go),
// one per lane of -faults.parallel lanes, so that a schedule may restart
// its server without touching the shared servers or the other lanes.
//
// # What a node logs
//
// A node appends one JSON line per event to a file of its own, one write(2)
// per line, so that what it logged before a SIGKILL stays logged. Every
// line carries CLOCK_MONOTONIC (unix.ClockGettime), which every process of a
// host shares, and which is the clock of the runtime's local deadlines (Go's
// monotonic clock on Linux). While it leads a name, the node's task logs:
//
//   - begin: the term's name and token, when the task starts;
//   - valid, every 25 ms: a checkpoint of the term's validity, with its
//     local deadline as read then (Until = the clock read just before
//     Term.Remaining, plus what remained: never later than the deadline the
//     runtime holds, however long the process pauses between the reads);
//   - write: the result of a fenced write of (token, seq), made every
//     100 ms after EnsureValid(100ms) and the checkpoint before it;
//   - end: when the task's context ends. The task logs it before it
//     returns, and a hand-off waits for the task before it releases the
//     lease (H1), so the end is logged before any other node can acquire;
//   - rt: the runtime's observer events (sessions opened, renewed and
//     ended, elections, revocations, backend errors), for the record only:
//     a failing schedule keeps every node's log, and the private ZooKeeper
//     server's, in a directory it names.
//
// # The validity interval of a term
//
// The checker gives each term the interval from its begin to the earlier of
// its logged end and the latest deadline its process logged for it. That is
// what the process demonstrably believed: a SIGSTOPped or SIGKILLed process
// logs nothing more, and its term counts as valid until the last deadline it
// recorded, not merely until its last line. A renewal that extended the
// deadline after the last checkpoint, before a pause, is not counted: the
// process did not act on it — it could not before the pause, every pause
// lasts longer than a lease, and on waking the deadline has passed (T3), so
// the next checkpoint, if any, logs no validity. Begin is logged when the
// task starts, after the runtime granted the term: a process cannot act on
// a term before that. The deadline, not the backend's expiry, is the claim
// under test: it is what a user's EnsureValid relies on (D1–D3).
//
// # The checks
//
// Per name, over every process of a schedule, by the repository's one term
// checker (internal/testkit/termcheck): the validity intervals do not
// overlap (each term begins after the validity of every earlier one ended);
// tokens increase strictly with the terms' order; the fenced resource, a
// fencing.Guard per name served by the test process on loopback HTTP, never
// accepted a write with a lower token than one it had accepted before, and
// every accepted token is one a node logged a term for. Any of these is a
// failure, with the plan and the command that replays it:
//
//	cd tests && go test ./faults -run 'TestFaults/Redis' -faults.seed=N -faults.schedules=1 -v
//
// The stale writes the fence refused, and the "late" writes it accepted
// after a newer term had begun (fencing allows them while the newer holder
// has not written yet), are counted, not failed.
//
// Liveness is measured, not asserted, except for a generous bound: after the
// last fault, every name has a holder again within 20 s. Per fault, the
// figures are the longest stretch with no holder of a name that began in the
// fault's window (from its start to the next fault's), and the time from the
// fault's end until every name had a holder again; TestFaults logs the worst
// per fault kind and backend, on lines that start "faults figures" (`make
// reliability` prints them).
//
// # Plans
//
// A plan is a function of its seed: -faults.faults faults (2), each followed
// by a quiet time of 0.7 to 1.2 leases, drawn from
//
//   - stop: SIGSTOP a node for 1.1 to 2 leases, then SIGCONT;
//   - stopwrite: the same, while the fence holds the node's write in flight
//     and lands it after the pause, when a newer holder has written: the
//     write a paused process lands late (§11), refused by its token;
//   - kill: SIGKILL a node and start it again (a new process, a new id:
//     n1.0, n1.1 …) after up to half a lease;
//   - cut: disable the node's proxy (connections closed, new ones refused)
//     for 0.2 to 1.5 leases;
//   - blackhole: a timeout toxic both ways (every byte dropped, connections
//     open) for 0.2 to 1.5 leases;
//   - latency: a latency toxic both ways, 2% to 30% of a lease per byte
//     (±25%), for 0.5 to 1.5 leases;
//   - restart: kill the lane's server and start it again with its data (at
//     most once per schedule). A Redis restart starts the amnesia guard
//     (the run id changed), so no lease is granted for a max lease (one
//     lease here), by design; ZooKeeper and PostgreSQL keep their state.
//
// Three faults in four hit the node that holds one of the names when the
// fault starts; the others hit a node drawn from the seed. The timing of a
// run is not reproducible, the plan is: a replay hits the same kinds of
// fault, with the same lengths, in the same order.
//
// The package's tests run while no other package of the tests module that
// holds the lock of package serial runs: beside them, on 2 cores under
// -race, tests/zookeeper's timed elections fail. The whole tests module
// takes about 2.5 minutes there.
//
// -faults.schedules (12) sets the schedules per backend; schedule i has
// seed -faults.seed + i (a seed from the clock if 0, logged). `make soak`
// runs 300 longer ones per backend.
//
// # Race reports
//
// Under -race the nodes are race-instrumented too. go-zookeeper v1.0.4 has a
// known data race between its own goroutines (Conn.recvLoop writing what
// Conn.sendSetWatches reads, conn.go:849 and :614, after a reconnection). A
// node's stderr is scanned for reports: one whose conflicting accesses have
// no frame of this module is counted and reported in the figures (with one
// sample in the verbose log), any other fails the schedule.
package faults
