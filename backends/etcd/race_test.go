//go:build race

package simbaetcd

// raceSlowdown stretches the tests' leases under the race detector, which
// slows the embedded server threefold or more (see testTTL).
const raceSlowdown = 3
