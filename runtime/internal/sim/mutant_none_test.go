//go:build !mutant_read_then_write

package sim

// mutant names the broken variant of the simulated resource this build
// runs, "" for none: mutant_read_then_write makes its fenced write read the
// highest token, then write a little later (F2 broken).
const mutant = ""
