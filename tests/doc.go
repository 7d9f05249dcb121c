// Package tests holds the tests that need dependencies the simba module
// must not pass on to its users: a TCP proxy (toxiproxy) between the
// servers of a ZooKeeper ensemble, in tests/zookeeper, and between node
// processes and their server in the multi-process fault schedules of
// tests/faults; and node processes that read the store's clock seconds
// apart, running a cron schedule on Redis, in tests/cron. `make test` runs
// them.
package tests
