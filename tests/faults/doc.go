// Package faults runs seeded fault schedules against node processes that
// contend for leases on a real backend (Redis, PostgreSQL, ZooKeeper), and
// checks safety from what the processes logged. See faults_test.go.
package faults
