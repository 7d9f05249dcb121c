package backends

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest lease name, in bytes (T1).
const MaxNameLen = 128

// MaxPartitions is the largest partition count of a group (§13).
const MaxPartitions = 65536

// NameError describes a lease or group name that breaks T1. It matches
// [ErrInvalidName] with errors.Is.
type NameError struct {
	Name   string // the rejected name, as given
	Reason string // what is wrong with it
}

// Error implements error.
func (e *NameError) Error() string {
	return fmt.Sprintf("invalid name %q: %s", e.Name, e.Reason)
}

// Is reports whether target is [ErrInvalidName].
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// ValidateName reports whether name is a valid lease name (T1): 1 to 128
// characters of [A-Za-z0-9._:-], and neither "." nor "..", so that a name
// means the same thing as a Redis key, a ZooKeeper path segment and a SQL
// value. It returns nil or a *NameError that names the first problem.
func ValidateName(name string) error {
	switch {
	case name == "":
		return &NameError{Name: name, Reason: "empty; want 1 to 128 characters of [A-Za-z0-9._:-]"}
	case len(name) > MaxNameLen:
		return &NameError{Name: name, Reason: fmt.Sprintf("%d bytes long; want at most %d", len(name), MaxNameLen)}
	case name == "." || name == "..":
		return &NameError{Name: name, Reason: `"." and ".." are reserved`}
	}
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if !nameChar(r) {
			return &NameError{Name: name, Reason: fmt.Sprintf("character %q at byte %d; want only [A-Za-z0-9._:-]", r, i)}
		}
		i += size
	}
	return nil
}

func nameChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
		r == '.' || r == '_' || r == ':' || r == '-'
}

// PartitionName returns the lease name of partition i of group: the group
// name, a dot and i in decimal ("billing.3").
func PartitionName(group string, i int) string {
	return group + "." + strconv.Itoa(i)
}

// SplitPartition is the inverse of [PartitionName]: it splits a lease name
// into a group and a partition index if the name ends in a dot and a decimal
// number without leading zeros. It does not check that such a group exists.
func SplitPartition(name string) (group string, i int, ok bool) {
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || dot == len(name)-1 {
		return "", 0, false
	}
	digits := name[dot+1:]
	if len(digits) > 1 && digits[0] == '0' {
		return "", 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n >= MaxPartitions || digits[0] == '+' || digits[0] == '-' {
		return "", 0, false
	}
	return name[:dot], n, true
}

// ValidateGroup reports whether group is a valid group name with the given
// number of partitions: 1 ≤ partitions ≤ [MaxPartitions], and every partition
// lease name, up to [PartitionName](group, partitions-1), is a valid lease
// name (§13).
func ValidateGroup(group string, partitions int) error {
	if partitions < 1 || partitions > MaxPartitions {
		return fmt.Errorf("%w %q: %d partitions; want 1 to %d", ErrInvalidGroup, group, partitions, MaxPartitions)
	}
	if err := ValidateName(group); err != nil {
		return err
	}
	if last := PartitionName(group, partitions-1); len(last) > MaxNameLen {
		return &NameError{Name: group, Reason: fmt.Sprintf(
			"group name too long for %d partitions: partition lease %q is %d bytes; want at most %d",
			partitions, last, len(last), MaxNameLen)}
	}
	return nil
}

// MaxIdentityLen is the longest session identity, in bytes.
const MaxIdentityLen = 256

// ValidateIdentity reports whether id is a valid session identity
// ([SessionOptions.Identity]): at most [MaxIdentityLen] bytes of UTF-8 with
// no control characters, so that it prints on one line of a status table and
// fits a ZooKeeper node, a Redis hash field and a SQL column alike. The empty
// identity is valid (none). It returns nil or an error wrapping
// [ErrInvalidIdentity] that says what is wrong.
func ValidateIdentity(id string) error {
	if len(id) > MaxIdentityLen {
		return fmt.Errorf("%w %.40q…: %d bytes long; want at most %d", ErrInvalidIdentity, id, len(id), MaxIdentityLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidIdentity, id)
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w %q: control character %U at byte %d; want printable text", ErrInvalidIdentity, id, r, i)
		}
	}
	return nil
}
