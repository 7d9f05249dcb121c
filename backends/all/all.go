// Package all registers every backend of this module with package
// backendurl, for programs that open any store a URL names (the simba
// command, the examples):
//
//	import _ "github.com/simba-go/simba/backends/all"
//
// It links every store's driver. A program that uses one store imports
// that backend's package alone (for example backends/redis), and links no
// other. The etcd backend lives in a module of its own
// (github.com/simba-go/simba/backends/etcd) and registers itself when
// imported; this package does not include it.
package all

import (
	// The memory store is registered by backendurl itself.
	_ "github.com/simba-go/simba/backends/mysql"
	_ "github.com/simba-go/simba/backends/postgres"
	_ "github.com/simba-go/simba/backends/redis"
	_ "github.com/simba-go/simba/backends/zookeeper"
)
