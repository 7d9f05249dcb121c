package backends_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba/backends"
)

// T1: a lease name is 1–128 characters of [A-Za-z0-9._:-], neither "." nor "..".
func TestValidateName(t *testing.T) {
	valid := []string{"a", "report", "billing.3", "A-b_c:d.e", "..a", "a..", strings.Repeat("x", 128)}
	for _, name := range valid {
		if err := backends.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	invalid := map[string]string{
		"":                       "empty",
		strings.Repeat("x", 129): "129 bytes long",
		".":                      "reserved",
		"..":                     "reserved",
		"a/b":                    `'/'`,
		"ünïcode":                `'ü'`,
		"sp ace":                 `' '`,
		"tab\t":                  `'\t'`,
		"star*":                  `'*'`,
		"{brace}":                `'{'`,
	}
	for name, want := range invalid {
		err := backends.ValidateName(name)
		if err == nil {
			t.Errorf("ValidateName(%q) = nil, want an error", name)
			continue
		}
		if !errors.Is(err, backends.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want it to match ErrInvalidName", name, err)
		}
		var ne *backends.NameError
		if !errors.As(err, &ne) || ne.Name != name {
			t.Errorf("ValidateName(%q) = %#v, want a *NameError naming the input", name, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateName(%q) = %q, want it to mention %s", name, err, want)
		}
	}
}

func TestPartitionNames(t *testing.T) {
	for _, tc := range []struct {
		group string
		i     int
	}{{"billing", 0}, {"billing", 15}, {"a.b", 65535}, {"x", 7}} {
		name := backends.PartitionName(tc.group, tc.i)
		g, i, ok := backends.SplitPartition(name)
		if !ok || g != tc.group || i != tc.i {
			t.Errorf("SplitPartition(%q) = %q, %d, %v; want %q, %d, true", name, g, i, ok, tc.group, tc.i)
		}
	}
	for _, name := range []string{"billing", "billing.", ".3", "billing.03", "billing.-1", "billing.+1", "billing.65536", "billing.x"} {
		if g, i, ok := backends.SplitPartition(name); ok {
			t.Errorf("SplitPartition(%q) = %q, %d, true; want not a partition", name, g, i)
		}
	}
}

func TestValidateGroup(t *testing.T) {
	if err := backends.ValidateGroup("billing", 16); err != nil {
		t.Fatalf("ValidateGroup(billing, 16) = %v", err)
	}
	// 122 + ".65535" = 128 bytes: just fits.
	if err := backends.ValidateGroup(strings.Repeat("g", 122), 65536); err != nil {
		t.Errorf("ValidateGroup(122 chars, 65536) = %v, want nil", err)
	}
	for _, tc := range []struct {
		group      string
		partitions int
		want       string
	}{
		{"billing", 0, "0 partitions; want 1 to 65536"},
		{"billing", -1, "-1 partitions"},
		{"billing", 65537, "65537 partitions"},
		{"bad/name", 4, "invalid name"},
		{strings.Repeat("g", 123), 65536, "too long for 65536 partitions"},
	} {
		err := backends.ValidateGroup(tc.group, tc.partitions)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateGroup(%q, %d) = %v, want an error containing %q", tc.group, tc.partitions, err, tc.want)
		}
		if !errors.Is(err, backends.ErrInvalidGroup) && !errors.Is(err, backends.ErrInvalidName) {
			t.Errorf("ValidateGroup(%q, %d) = %v, want it to match ErrInvalidGroup or ErrInvalidName", tc.group, tc.partitions, err)
		}
	}
}
