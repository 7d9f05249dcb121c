package runtime_test

import (
	"testing"
	"testing/synctest"
)

// §13: eight members joining an empty 1,024-partition group at once acquire
// each partition exactly once: no partition is taken by one member and
// handed on to another as the others' joins become visible.
func TestGroupSimultaneousJoinsMoveNothingTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGroupRig(t, 1024)
		defer r.close()
		r.change("8 members join an empty group at once", 2*cfg.RenewInterval, func() {
			for range 8 {
				r.join()
			}
		})
	})
}
