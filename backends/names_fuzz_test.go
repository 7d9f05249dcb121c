package backends_test

import (
	"strings"
	"testing"

	"github.com/simba-go/simba/backends"
)

// FuzzValidateName: T1 holds for whatever ValidateName accepts — 1 to 128
// characters of [A-Za-z0-9._:-], neither "." nor ".." — and everything else
// is refused with an error naming the bad input; a partition name of an
// accepted group splits back into its group and index.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"report", "billing.3", "a", ".", "..", "a/b", "x y", "é", strings.Repeat("n", 128),
		strings.Repeat("n", 129), "ns:lease-1_2", "", "\x00", "billing.0007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := backends.ValidateName(name)
		valid := len(name) >= 1 && len(name) <= 128 && name != "." && name != ".." &&
			strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == ""
		if (err == nil) != valid {
			t.Fatalf("ValidateName(%q) = %v; T1 says valid=%v", name, err, valid)
		}
		if err != nil {
			return
		}
		if len(name) <= 120 {
			if err := backends.ValidateGroup(name, 10); err == nil {
				p := backends.PartitionName(name, 7)
				if g, i, ok := backends.SplitPartition(p); !ok || g != name || i != 7 {
					t.Fatalf("SplitPartition(PartitionName(%q, 7)) = %q, %d, %v", name, g, i, ok)
				}
				if err := backends.ValidateName(p); err != nil {
					t.Fatalf("partition name %q of a valid group: %v", p, err)
				}
			}
		}
	})
}
