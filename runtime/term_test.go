package runtime

import (
	"testing"
	"time"
)

// T3: Valid, Remaining and a passing EnsureValid allocate nothing.
func TestTermReadsDoNotAllocate(t *testing.T) {
	var d deadline
	d.set(mono(time.Hour))
	start := time.Now()
	term := newTerm(nil, "report", 7, &d, func() mono { return time.Since(start) })
	allocs := testing.AllocsPerRun(1000, func() {
		if !term.Valid() || term.Remaining() <= 0 || term.EnsureValid(time.Second) != nil {
			t.Fatal("term not valid")
		}
	})
	if allocs != 0 {
		t.Fatalf("Valid/Remaining/EnsureValid allocate %v times per call, want 0", allocs)
	}
}

// BenchmarkTermValid measures Valid and Remaining (target: 0 allocations).
func BenchmarkTermValid(b *testing.B) {
	var d deadline
	d.set(mono(time.Hour))
	start := time.Now()
	term := newTerm(nil, "report", 7, &d, func() mono { return time.Since(start) })
	b.ReportAllocs()
	for b.Loop() {
		if !term.Valid() || term.Remaining() <= 0 {
			b.Fatal("invalid")
		}
	}
}
