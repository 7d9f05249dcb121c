// Package simbazk is the ZooKeeper backend of Simba: every Simba session is
// one ZooKeeper session, a lease is an ephemeral node whose creation zxid is
// its fencing token, and candidates watch the lease node to take over at
// once when it is deleted. Its package name is simbazk, not zk, so that it
// does not clash with go-zookeeper's package in code that uses both.
package simbazk
