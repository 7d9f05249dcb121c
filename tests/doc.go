// Package tests holds the tests that need dependencies the simba module
// must not pass on to its users: a TCP proxy (toxiproxy) between the
// servers of a ZooKeeper ensemble, in tests/zookeeper. `make test` runs them.
package tests
