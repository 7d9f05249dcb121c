package backends

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SequencerVersion is the first word of every sequencer this release writes
// and the only one it reads.
const SequencerVersion = "simba-seq/1"

// SequencerModeLease is the mode word of a lease's sequencer: a term of an
// election, a lock, a schedule or a partition. It is the only mode of
// version 1; a later kind of term (a semaphore's permit) gets a mode word of
// its own, which today's parsers refuse.
const SequencerModeLease = "lease"

// ErrInvalidSequencer reports text that is not a sequencer; the error is a
// *SequencerError, which says what is wrong.
var ErrInvalidSequencer = errors.New("invalid sequencer")

// Sequencer identifies one term of one lease, for a service downstream of
// the holder to check (§7): the lease name and the term's fencing token.
// Its text form ([Sequencer.String]) travels with a request; the service
// parses it ([ParseSequencer]) and refuses a request whose token is lower
// than the highest it has seen for that name, as a fenced resource does
// (F1). Chubby calls this a sequencer.
//
// Runtime's terms and package fencing share this type, so that the format
// is defined once.
type Sequencer struct {
	Name  string // the lease name (T1)
	Token Token  // the term's fencing token, at least 1
}

// String returns the sequencer's text form, which [ParseSequencer] reads
// back to the same value:
//
//	simba-seq/1 lease NAME TOKEN
//
// four words separated by single spaces: the version, the mode, the lease
// name and the token in decimal. Treat it as opaque: only ParseSequencer
// should look inside. A Sequencer with an invalid name or a token below 1
// prints all the same, and ParseSequencer refuses the text.
func (s Sequencer) String() string {
	return SequencerVersion + " " + SequencerModeLease + " " + s.Name + " " + strconv.FormatInt(int64(s.Token), 10)
}

// SequencerError describes text that [ParseSequencer] refused. It matches
// [ErrInvalidSequencer] with errors.Is.
type SequencerError struct {
	Text   string // the refused text, as given
	Reason string // what is wrong with it
}

// maxQuoted is how much of a refused text an error quotes: a sequencer is
// at most about 170 bytes, and the text may come from anyone.
const maxQuoted = 200

// Error implements error. It quotes at most the first 200 bytes of the
// text.
func (e *SequencerError) Error() string {
	if len(e.Text) > maxQuoted {
		return fmt.Sprintf("invalid sequencer %q… (%d bytes): %s", e.Text[:maxQuoted], len(e.Text), e.Reason)
	}
	return fmt.Sprintf("invalid sequencer %q: %s", e.Text, e.Reason)
}

// clip quotes one word of a refused text, cut after 40 bytes.
func clip(word string) string {
	const max = 40
	if len(word) > max {
		return fmt.Sprintf("%q… (%d bytes)", word[:max], len(word))
	}
	return strconv.Quote(word)
}

// Is reports whether target is [ErrInvalidSequencer].
func (e *SequencerError) Is(target error) bool { return target == ErrInvalidSequencer }

// ParseSequencer reads the text form of a sequencer, as [Sequencer.String]
// writes it, and nothing else: the version word simba-seq/1, the mode word
// lease, a lease name that [ValidateName] accepts, and a token from 1 to
// 2^63-1 in decimal without sign or leading zeros, separated by single
// spaces. So whatever it accepts, String gives back byte for byte. Any
// other text gives a *SequencerError that names the first problem.
func ParseSequencer(text string) (Sequencer, error) {
	fail := func(format string, args ...any) (Sequencer, error) {
		return Sequencer{}, &SequencerError{Text: text, Reason: fmt.Sprintf(format, args...)}
	}
	words := strings.Split(text, " ")
	if len(words) != 4 {
		return fail("%d words separated by single spaces; want 4: %s %s NAME TOKEN",
			len(words), SequencerVersion, SequencerModeLease)
	}
	version, mode, name, token := words[0], words[1], words[2], words[3]
	if version != SequencerVersion {
		if strings.HasPrefix(version, "simba-seq/") {
			return fail("version %s; this release reads %s only", clip(version), SequencerVersion)
		}
		return fail("first word %s; want %s", clip(version), SequencerVersion)
	}
	if mode != SequencerModeLease {
		return fail("mode %s; want %s", clip(mode), SequencerModeLease)
	}
	if err := ValidateName(name); err != nil {
		var ne *NameError
		if errors.As(err, &ne) {
			return fail("lease name %s: %s", clip(name), ne.Reason)
		}
		return fail("lease name %s: %v", clip(name), err)
	}
	n, err := strconv.ParseInt(token, 10, 64)
	if err != nil || n < 1 || token[0] == '+' || token[0] == '0' {
		return fail("token %s; want a decimal integer from 1 to 9223372036854775807, without sign or leading zeros", clip(token))
	}
	return Sequencer{Name: name, Token: Token(n)}, nil
}
