//go:build mutant_read_then_write

package sim

// A fenced resource that reads, then writes: see mutant_none_test.go.
const mutant = "read-then-write"
