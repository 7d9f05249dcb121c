package annotations

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/cronexpr"
)

// Prefix starts every simba directive.
const Prefix = "//simba:"

// Kind is the kind of a directive.
type Kind uint8

const (
	// Scheduled is //simba:scheduled: leader-only work on one lease.
	Scheduled Kind = iota + 1
	// Partitioned is //simba:partitioned: work on every partition of a
	// group that this node holds.
	Partitioned
)

// String returns the directive's name, "scheduled" or "partitioned".
func (k Kind) String() string {
	switch k {
	case Scheduled:
		return "scheduled"
	case Partitioned:
		return "partitioned"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// NameKey returns the key that names the directive's lease or group:
// "lease" or "group".
func (k Kind) NameKey() string {
	if k == Partitioned {
		return "group"
	}
	return "lease"
}

// Directive is a parsed, valid directive.
type Directive struct {
	// Kind is the directive: Scheduled or Partitioned.
	Kind Kind
	// Name is the lease (Scheduled) or the group (Partitioned).
	Name string
	// Partitions is the group's partition count (Partitioned only).
	Partitions int
	// Rate, Delay and Cron: at most one is set (exactly one for Scheduled).
	Rate, Delay time.Duration
	// Cron is a cron expression (R1), "" if none.
	Cron string
	// TZ is the IANA name of the location Cron is read in, "" for UTC.
	TZ string
	// OverlapAfter is overlap=after: a Cron slot that came while a run
	// went on runs when it returns (R3). The default, overlap=skip, skips it.
	OverlapAfter bool
	// CatchUp is how old a missed Cron slot may be and still run (R3).
	CatchUp time.Duration
	// Initial is the wait after each election before the first run.
	Initial time.Duration
	// Step is the validity each run and each item needs (E1).
	Step time.Duration
	// Items names the source of typed steps (G2), "" if none.
	Items string

	// Args are the arguments as written, in order, for pointing at one of
	// them in a message. They are not part of the directive's value:
	// [Directive.String] and [Directive.Equal] ignore them. A Directive
	// built by hand has none.
	Args []Arg
}

// Arg is one key=value argument as written in a comment.
type Arg struct {
	Key         string // the text before "="
	Value       string // the text after "=", as written
	Offset      int    // byte offset of the key in the comment text
	ValueOffset int    // byte offset of the value
}

// Equal reports whether d and e have the same value, ignoring Args.
func (d *Directive) Equal(e *Directive) bool {
	a, b := *d, *e
	a.Args, b.Args = nil, nil
	return a.Kind == b.Kind && a.Name == b.Name && a.Partitions == b.Partitions &&
		a.Rate == b.Rate && a.Delay == b.Delay && a.Initial == b.Initial &&
		a.Step == b.Step && a.Items == b.Items && a.Cron == b.Cron && a.TZ == b.TZ &&
		a.OverlapAfter == b.OverlapAfter && a.CatchUp == b.CatchUp
}

// ValueOffset returns the byte offset of key's value in the comment d was
// parsed from, and false if d has no such argument.
func (d *Directive) ValueOffset(key string) (int, bool) {
	for _, a := range d.Args {
		if a.Key == key {
			return a.ValueOffset, true
		}
	}
	return 0, false
}

// String returns d in canonical form, a line comment that [Parse] reads back
// as the same directive (see the package documentation).
func (d *Directive) String() string {
	var b strings.Builder
	b.WriteString(Prefix)
	b.WriteString(d.Kind.String())
	arg := func(key, value string) {
		b.WriteString(" ")
		b.WriteString(key)
		b.WriteString("=")
		b.WriteString(value)
	}
	arg(d.Kind.NameKey(), d.Name)
	if d.Kind == Partitioned {
		arg("partitions", strconv.Itoa(d.Partitions))
	}
	for _, f := range []struct {
		key string
		d   time.Duration
	}{{"rate", d.Rate}, {"delay", d.Delay}} {
		if f.d != 0 {
			arg(f.key, f.d.String())
		}
	}
	if d.Cron != "" {
		arg("cron", strconv.Quote(d.Cron))
	}
	if d.TZ != "" {
		arg("tz", d.TZ)
	}
	if d.OverlapAfter {
		arg("overlap", "after")
	}
	for _, f := range []struct {
		key string
		d   time.Duration
	}{{"catchup", d.CatchUp}, {"initial", d.Initial}, {"step", d.Step}} {
		if f.d != 0 {
			arg(f.key, f.d.String())
		}
	}
	if d.Items != "" {
		arg("items", d.Items)
	}
	return b.String()
}

// Error is one problem in a directive.
type Error struct {
	// Offset is the byte offset in the comment text of what is wrong: the
	// value of a bad value, the key of an unknown or repeated key, 0 for a
	// problem with the directive as a whole. Add it to the column of the
	// comment's first slash to get the column in the file.
	Offset int
	// Key is the key at fault, "" if none.
	Key string
	// Msg says what is wrong and what is allowed.
	Msg string
}

// Error returns "column N: message", N counted from the comment's first
// slash as column 1.
func (e *Error) Error() string { return fmt.Sprintf("column %d: %s", e.Offset+1, e.Msg) }

// ErrorList is every problem found in one directive, by offset.
type ErrorList []*Error

// Error returns the first error and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0], len(l)-1)
}

// Parse parses one line comment, its raw text with the leading "//" (as in
// [go/ast.Comment].Text; never [go/ast.CommentGroup.Text], which drops
// directives). It returns:
//
//   - nil, nil if the comment is not a simba directive (see [NearMiss] for
//     comments that look like one but are not);
//   - the directive and nil if it is a valid one;
//   - nil and an [ErrorList] of every problem found otherwise, including an
//     unknown directive name such as //simba:schedule (with a hint).
func Parse(comment string) (*Directive, error) {
	if !strings.HasPrefix(comment, Prefix) {
		return nil, nil
	}
	dir, ok := ast.ParseDirective(token.NoPos, comment)
	if !ok || dir.Tool != "simba" {
		// "//simba: scheduled", "//simba:Scheduled": not a directive to Go,
		// but clearly meant as one.
		word := strings.TrimPrefix(comment, Prefix)
		if i := strings.IndexFunc(word, unicode.IsSpace); i >= 0 {
			word = word[:i]
		}
		if word != "" {
			return nil, ErrorList{{Offset: 0, Msg: unknownName(word)}}
		}
		return nil, ErrorList{{Offset: 0, Msg: fmt.Sprintf(
			"%s must be followed at once, with no space, by scheduled or partitioned", Prefix)}}
	}
	var kind Kind
	switch dir.Name {
	case "scheduled":
		kind = Scheduled
	case "partitioned":
		kind = Partitioned
	default:
		return nil, ErrorList{{Offset: 0, Msg: unknownName(dir.Name)}}
	}
	// ParseDirective gives the arguments' offset; they are split here
	// rather than by Directive.ParseArgs, which would unquote "a b" and
	// report a bad quote without a position: values are unquoted words.
	p := parser{d: &Directive{Kind: kind}}
	p.args(dir.Args, int(dir.ArgsPos))
	p.check()
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Offset - b.Offset })
		return nil, p.errs
	}
	return p.d, nil
}

// unknownName is the message for //simba:name with a name that is neither
// scheduled nor partitioned, with a hint when it is close to one.
func unknownName(name string) string {
	for _, want := range []string{"scheduled", "partitioned"} {
		if nearName(name, want) {
			return fmt.Sprintf("unknown directive %s%s; did you mean %s%s?", Prefix, name, Prefix, want)
		}
	}
	return fmt.Sprintf("unknown directive %s%s; want %sscheduled or %spartitioned", Prefix, name, Prefix, Prefix)
}

// nearName reports whether a looks like a misspelling of b: a prefix of
// it, a case variant, or within two edits.
func nearName(a, b string) bool {
	la := strings.ToLower(a)
	return strings.HasPrefix(b, la) && len(la) >= 4 || strings.HasPrefix(la, b) || distance(la, b) <= 2
}

// distance is the Levenshtein distance of a and b, in bytes.
func distance(a, b string) int {
	if len(a) > 64 {
		return len(a) // far from any directive name; keeps the work bounded
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// NearMiss reports a comment that looks like a simba directive but that Go
// does not read as one, such as "// simba:scheduled …" (a space after the
// slashes) or "//Simba:scheduled …" (upper case). Such a comment generates
// nothing, so the generator warns about it. It returns nil for any other
// comment, directives included.
func NearMiss(comment string) *Error {
	rest, ok := strings.CutPrefix(comment, "//")
	if !ok || strings.HasPrefix(comment, Prefix) {
		return nil
	}
	trimmed := strings.TrimLeftFunc(rest, unicode.IsSpace)
	if len(trimmed) < len("simba:") || !strings.EqualFold(trimmed[:len("simba:")], "simba:") {
		return nil
	}
	word := trimmed
	if i := strings.IndexFunc(word, unicode.IsSpace); i >= 0 {
		word = word[:i]
	}
	if trimmed != rest {
		return &Error{Msg: fmt.Sprintf("%q is an ordinary comment, not a directive, because of the space after //; write //%s", "// "+word, strings.ToLower(word[:len("simba:")])+word[len("simba:"):])}
	}
	return &Error{Msg: fmt.Sprintf("%q is an ordinary comment, not a directive: directives are lower case; write //simba:%s", "//"+word, word[len("simba:"):])}
}

// parser collects a directive's arguments and every problem with them.
type parser struct {
	d    *Directive
	errs ErrorList
	seen map[string]int // key → index in d.Args
}

func (p *parser) errorf(offset int, key, format string, args ...any) {
	p.errs = append(p.errs, &Error{Offset: offset, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// keys lists the keys each kind accepts, in canonical order.
var keys = map[Kind][]string{
	Scheduled:   {"lease", "rate", "delay", "cron", "tz", "overlap", "catchup", "initial", "step", "items"},
	Partitioned: {"group", "partitions", "rate", "delay", "cron", "tz", "overlap", "catchup", "initial", "step", "items"},
}

// args splits s, which starts at offset base in the comment, into key=value
// arguments and converts each value. A value that starts with a double
// quote is a Go string literal, which may hold spaces (cron="0 * * * *").
func (p *parser) args(s string, base int) {
	p.seen = make(map[string]int)
	start := -1
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' && start >= 0 && i > 0 && s[i-1] == '=':
			// A quoted value: skip to its end, spaces and all.
			if q, err := strconv.QuotedPrefix(s[i:]); err == nil {
				i += len(q)
				continue
			}
			p.errorf(base+i, "", "unterminated or invalid quoted value %s; want a Go string literal such as \"0 */5 * * * *\"", s[i:])
			return
		case !unicode.IsSpace(r):
			if start < 0 {
				start = i
			}
		case start >= 0:
			p.arg(s[start:i], base+start)
			start = -1
		}
		i += size
	}
	if start >= 0 {
		p.arg(s[start:], base+start)
	}
}

func (p *parser) arg(word string, offset int) {
	key, value, ok := strings.Cut(word, "=")
	switch {
	case !ok && len(p.d.Args) > 0 && p.d.Args[len(p.d.Args)-1].Key == "cron":
		p.errorf(offset, "", "argument %q is not key=value; quote a cron expression that has spaces: cron=\"0 */5 * * * *\"", word)
		return
	case !ok:
		p.errorf(offset, "", "argument %q is not key=value", word)
		return
	case key == "":
		p.errorf(offset, "", "argument %q has no key", word)
		return
	case !slices.Contains(keys[p.d.Kind], key):
		p.errorf(offset, key, "%s", unknownKey(p.d.Kind, key))
		return
	}
	if _, dup := p.seen[key]; dup {
		p.errorf(offset, key, "duplicate key %s=", key)
		return
	}
	a := Arg{Key: key, Value: value, Offset: offset, ValueOffset: offset + len(key) + 1}
	p.seen[key] = len(p.d.Args)
	p.d.Args = append(p.d.Args, a)
	if value == "" {
		p.errorf(a.ValueOffset, key, "%s= has no value; want %s", key, want[key])
		return
	}
	p.value(a)
}

// want describes each key's values, for messages.
var want = map[string]string{
	"lease":      "a lease name (1 to 128 characters of [A-Za-z0-9._:-])",
	"group":      "a group name (1 to 128 characters of [A-Za-z0-9._:-])",
	"partitions": fmt.Sprintf("a decimal number from 1 to %d", backends.MaxPartitions),
	"rate":       "a duration of at least 1ms, such as 5m",
	"delay":      "a duration of at least 1ms, such as 30s",
	"initial":    "a duration >= 0, such as 10s",
	"step":       "a duration >= 0, such as 2s",
	"items":      "the name of the function or method that yields the items",
	"cron":       `a cron expression, quoted when it has spaces: cron="0 */5 * * * *"`,
	"tz":         "an IANA time zone name, such as Europe/Paris",
	"overlap":    "skip or after",
	"catchup":    "a duration >= 0, such as 1m",
}

func unknownKey(k Kind, key string) string {
	msg := fmt.Sprintf("unknown key %q in %s%s; want %s", key, Prefix, k, strings.Join(keys[k], ", "))
	switch {
	case k == Partitioned && key == "lease":
		msg += " (a partitioned task names its group, whose partitions are the leases)"
	case k == Scheduled && (key == "group" || key == "partitions"):
		msg += fmt.Sprintf(" (%s= belongs to %spartitioned)", key, Prefix)
	}
	return msg
}

// value converts one argument's value into d.
func (p *parser) value(a Arg) {
	d := p.d
	switch a.Key {
	case "lease", "group":
		// The group's partition lease names are checked in check, once
		// the partition count is known.
		if err := backends.ValidateName(a.Value); err != nil {
			p.nameError(a, err)
			return
		}
		d.Name = a.Value
	case "partitions":
		n, err := strconv.Atoi(a.Value)
		if err != nil || strings.TrimLeft(a.Value, "0123456789") != "" || n < 1 || n > backends.MaxPartitions {
			p.errorf(a.ValueOffset, a.Key, "partitions=%s: want %s", a.Value, want[a.Key])
			return
		}
		d.Partitions = n
	case "cron":
		p.cron(a)
	case "tz":
		if a.Value == "Local" {
			p.errorf(a.ValueOffset, a.Key, "tz=Local: want %s; the local zone differs between nodes", want[a.Key])
			return
		}
		loc, err := time.LoadLocation(a.Value)
		if err != nil || strings.HasPrefix(a.Value, "\"") {
			p.errorf(a.ValueOffset, a.Key, "tz=%s: unknown time zone; want %s", a.Value, want[a.Key])
			return
		}
		d.TZ = loc.String()
	case "overlap":
		switch a.Value {
		case "skip":
		case "after":
			d.OverlapAfter = true
		default:
			p.errorf(a.ValueOffset, a.Key, "overlap=%s: want %s", a.Value, want[a.Key])
		}
	case "rate", "delay", "initial", "step", "catchup":
		v, err := time.ParseDuration(a.Value)
		if err != nil {
			p.errorf(a.ValueOffset, a.Key, "%s=%s: %v; want %s", a.Key, a.Value, err, want[a.Key])
			return
		}
		positive := a.Key == "rate" || a.Key == "delay"
		if positive && v < time.Millisecond || v < 0 {
			p.errorf(a.ValueOffset, a.Key, "%s=%s: want %s", a.Key, a.Value, want[a.Key])
			return
		}
		if a.Key == "rate" && v%time.Millisecond != 0 {
			p.errorf(a.ValueOffset, a.Key, "rate=%s: want a whole number of milliseconds (a rate's slots are counted in milliseconds of the store's clock)", a.Value)
			return
		}
		switch a.Key {
		case "rate":
			d.Rate = v
		case "delay":
			d.Delay = v
		case "initial":
			d.Initial = v
		case "step":
			d.Step = v
		case "catchup":
			d.CatchUp = v
		}
	case "items":
		if !token.IsIdentifier(a.Value) || a.Value == "_" {
			p.errorf(a.ValueOffset, a.Key, "items=%s: want %s", a.Value, want[a.Key])
			return
		}
		d.Items = a.Value
	}
}

// cron reads a cron= value, quoted or not, and points an error at the
// field at fault.
func (p *parser) cron(a Arg) {
	text, at := a.Value, a.ValueOffset
	if strings.HasPrefix(text, "\"") {
		u, err := strconv.Unquote(text)
		if err != nil {
			p.errorf(at, a.Key, "cron=%s: %v; want %s", a.Value, err, want[a.Key])
			return
		}
		if u == text[1:len(text)-1] { // no escapes: offsets carry over
			at++
		}
		text = u
	}
	if _, err := cronexpr.Parse(text, nil); err != nil {
		var ce *cronexpr.Error
		if errors.As(err, &ce) {
			if at > a.ValueOffset || !strings.HasPrefix(a.Value, "\"") {
				at += ce.Offset
			}
			if ce.Field != "" {
				p.errorf(at, a.Key, "cron=%s: %s field %q: %s", a.Value, ce.Field, ce.Value, ce.Reason)
			} else {
				p.errorf(at, a.Key, "cron=%s: %s", a.Value, ce.Reason)
			}
			return
		}
		p.errorf(at, a.Key, "cron=%s: %v", a.Value, err)
		return
	}
	p.d.Cron = text
}

func (p *parser) nameError(a Arg, err error) {
	reason := err.Error()
	var ne *backends.NameError
	if errors.As(err, &ne) {
		reason = ne.Reason
	}
	what := "lease"
	if a.Key == "group" {
		what = "group"
	}
	p.errorf(a.ValueOffset, a.Key, "%s=%s: invalid %s name: %s", a.Key, a.Value, what, reason)
}

// check reports missing keys and keys that exclude each other.
func (p *parser) check() {
	d := p.d
	nameKey := d.Kind.NameKey()
	if _, ok := p.seen[nameKey]; !ok {
		p.errorf(0, nameKey, "%s%s needs %s=NAME", Prefix, d.Kind, nameKey)
	}
	var when []int // the indexes of rate=, delay= and cron=
	for _, k := range []string{"rate", "delay", "cron"} {
		if i, ok := p.seen[k]; ok {
			when = append(when, i)
		}
	}
	switch {
	case len(when) > 1:
		second := d.Args[slices.Max(when)]
		p.errorf(second.Offset, second.Key, "rate=, delay= and cron= exclude each other; want one: rate= for a fixed rate, delay= for a fixed delay after each run, cron= for a cron expression")
	case len(when) == 0 && d.Kind == Scheduled:
		p.errorf(0, "rate", "%sscheduled needs rate=DURATION (a fixed rate), delay=DURATION (a fixed delay after each run) or cron=\"EXPRESSION\"", Prefix)
	}
	if _, hasCron := p.seen["cron"]; !hasCron {
		for _, k := range []string{"tz", "overlap", "catchup"} {
			if i, ok := p.seen[k]; ok {
				p.errorf(d.Args[i].Offset, k, "%s= applies to cron= schedules only", k)
			}
		}
	}
	if d.Kind != Partitioned {
		return
	}
	if _, ok := p.seen["partitions"]; !ok {
		p.errorf(0, "partitions", "%spartitioned needs partitions=N, N from 1 to %d", Prefix, backends.MaxPartitions)
	}
	// The longest partition lease name must be valid too (§13).
	if d.Name != "" && d.Partitions > 0 {
		if err := backends.ValidateGroup(d.Name, d.Partitions); err != nil {
			a := d.Args[p.seen["group"]]
			var ne *backends.NameError
			if errors.As(err, &ne) {
				err = errors.New(ne.Reason)
			}
			p.errorf(a.ValueOffset, a.Key, "group=%s: %v", a.Value, err)
		}
	}
}
