package annotations

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// G1: every key, both kinds, in any order, with the defaults left out.
func TestParseValid(t *testing.T) {
	tests := []struct {
		comment string
		want    Directive
		canon   string
	}{
		{
			comment: "//simba:scheduled lease=report rate=5m step=2s",
			want:    Directive{Kind: Scheduled, Name: "report", Rate: 5 * time.Minute, Step: 2 * time.Second},
			canon:   "//simba:scheduled lease=report rate=5m0s step=2s",
		},
		{
			comment: "//simba:scheduled   delay=30s\tlease=a.b:c-d_e initial=1m30s items=Pending  ",
			want:    Directive{Kind: Scheduled, Name: "a.b:c-d_e", Delay: 30 * time.Second, Initial: 90 * time.Second, Items: "Pending"},
			canon:   "//simba:scheduled lease=a.b:c-d_e delay=30s initial=1m30s items=Pending",
		},
		{
			comment: "//simba:partitioned group=billing partitions=16 delay=30s step=1s",
			want:    Directive{Kind: Partitioned, Name: "billing", Partitions: 16, Delay: 30 * time.Second, Step: time.Second},
			canon:   "//simba:partitioned group=billing partitions=16 delay=30s step=1s",
		},
		{
			// G1: a partitioned task with neither rate nor delay runs once per term.
			comment: "//simba:partitioned partitions=65536 group=g",
			want:    Directive{Kind: Partitioned, Name: "g", Partitions: 65536},
			canon:   "//simba:partitioned group=g partitions=65536",
		},
		{
			comment: "//simba:partitioned group=g partitions=1 rate=1ms initial=0s step=0 items=näme",
			want:    Directive{Kind: Partitioned, Name: "g", Partitions: 1, Rate: time.Millisecond, Items: "näme"},
			canon:   "//simba:partitioned group=g partitions=1 rate=1ms items=näme",
		},
		{
			// The longest group name that still leaves room for ".65535".
			comment: "//simba:partitioned group=" + strings.Repeat("g", 122) + " partitions=65536",
			want:    Directive{Kind: Partitioned, Name: strings.Repeat("g", 122), Partitions: 65536},
			canon:   "//simba:partitioned group=" + strings.Repeat("g", 122) + " partitions=65536",
		},
		{
			// R1, R3: a quoted cron expression with spaces, its zone, overlap and catch-up.
			comment: `//simba:scheduled lease=report cron="0 */5 * * * *" tz=Europe/Paris overlap=after catchup=1m`,
			want:    Directive{Kind: Scheduled, Name: "report", Cron: "0 */5 * * * *", TZ: "Europe/Paris", OverlapAfter: true, CatchUp: time.Minute},
			canon:   `//simba:scheduled lease=report cron="0 */5 * * * *" tz=Europe/Paris overlap=after catchup=1m0s`,
		},
		{
			// A descriptor needs no quotes; overlap=skip is the default.
			comment: "//simba:partitioned group=g partitions=4 overlap=skip cron=@daily",
			want:    Directive{Kind: Partitioned, Name: "g", Partitions: 4, Cron: "@daily"},
			canon:   `//simba:partitioned group=g partitions=4 cron="@daily"`,
		},
		{
			comment: "//simba:scheduled lease=" + strings.Repeat("x", 128) + " rate=1.5s",
			want:    Directive{Kind: Scheduled, Name: strings.Repeat("x", 128), Rate: 1500 * time.Millisecond},
			canon:   "//simba:scheduled lease=" + strings.Repeat("x", 128) + " rate=1.5s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.comment, func(t *testing.T) {
			d, err := Parse(tt.comment)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !d.Equal(&tt.want) {
				t.Errorf("Parse = %+v; want %+v", *d, tt.want)
			}
			if got := d.String(); got != tt.canon {
				t.Errorf("String = %q; want %q", got, tt.canon)
			}
			for _, a := range d.Args {
				if got := tt.comment[a.Offset : a.Offset+len(a.Key)]; got != a.Key {
					t.Errorf("arg %s: key offset %d points at %q", a.Key, a.Offset, got)
				}
				if got := tt.comment[a.ValueOffset : a.ValueOffset+len(a.Value)]; got != a.Value {
					t.Errorf("arg %s: value offset %d points at %q", a.Key, a.ValueOffset, got)
				}
			}
		})
	}
}

// Comments that are not simba directives are not Parse's business.
func TestParseIgnores(t *testing.T) {
	for _, c := range []string{
		"// simba:scheduled lease=x rate=1s", // a near miss: NearMiss warns
		"//go:generate go run x",
		"// Report sends the report.",
		"/* simba:scheduled */",
		"//simbax:scheduled",
		"//",
		"",
	} {
		d, err := Parse(c)
		if d != nil || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want nil, nil", c, d, err)
		}
	}
}

// G1: unknown keys, duplicates, bad values, missing and exclusive keys, and
// misspelt directive names are errors with the key and its column.
func TestParseErrors(t *testing.T) {
	long := strings.Repeat("g", 123)
	tests := []struct {
		comment string
		want    []string // "column: key: message"
	}{
		{"//simba:schedule lease=x rate=1s", []string{`1: : unknown directive //simba:schedule; did you mean //simba:scheduled?`}},
		{"//simba:Scheduled lease=x rate=1s", []string{`1: : unknown directive //simba:Scheduled; did you mean //simba:scheduled?`}},
		{"//simba:partition group=x partitions=2", []string{`1: : unknown directive //simba:partition; did you mean //simba:partitioned?`}},
		{"//simba:leader lease=x", []string{`1: : unknown directive //simba:leader; want //simba:scheduled or //simba:partitioned`}},
		{"//simba: scheduled lease=x", []string{`1: : //simba: must be followed at once, with no space, by scheduled or partitioned`}},
		{"//simba:", []string{`1: : //simba: must be followed at once, with no space, by scheduled or partitioned`}},
		{"//simba:scheduled", []string{
			`1: lease: //simba:scheduled needs lease=NAME`,
			`1: rate: //simba:scheduled needs rate=DURATION (a fixed rate), delay=DURATION (a fixed delay after each run) or cron="EXPRESSION"`,
		}},
		{"//simba:scheduled lease=x rate=1s colour=red", []string{
			`35: colour: unknown key "colour" in //simba:scheduled; want lease, rate, delay, cron, tz, overlap, catchup, initial, step, items`,
		}},
		{"//simba:scheduled lease=x rate=1s Rate=2s", []string{
			`35: Rate: unknown key "Rate" in //simba:scheduled; want lease, rate, delay, cron, tz, overlap, catchup, initial, step, items`,
		}},
		{"//simba:scheduled lease=x rate=1s group=g", []string{
			`35: group: unknown key "group" in //simba:scheduled; want lease, rate, delay, cron, tz, overlap, catchup, initial, step, items (group= belongs to //simba:partitioned)`,
		}},
		{"//simba:partitioned lease=x partitions=2", []string{
			`1: group: //simba:partitioned needs group=NAME`,
			`21: lease: unknown key "lease" in //simba:partitioned; want group, partitions, rate, delay, cron, tz, overlap, catchup, initial, step, items (a partitioned task names its group, whose partitions are the leases)`,
		}},
		{"//simba:scheduled lease=x rate=1s rate=2s", []string{`35: rate: duplicate key rate=`}},
		{"//simba:scheduled lease=x lease=y rate=1s", []string{`27: lease: duplicate key lease=`}},
		{"//simba:scheduled lease=x rate=1s delay=2s", []string{
			`35: delay: rate=, delay= and cron= exclude each other; want one: rate= for a fixed rate, delay= for a fixed delay after each run, cron= for a cron expression`,
		}},
		{"//simba:partitioned group=g partitions=2 delay=1s rate=2s", []string{
			`51: rate: rate=, delay= and cron= exclude each other; want one: rate= for a fixed rate, delay= for a fixed delay after each run, cron= for a cron expression`,
		}},
		// R1: a malformed cron expression points at the field at fault.
		{`//simba:scheduled lease=x cron="0 */5 25 * * *"`, []string{
			`39: cron: cron="0 */5 25 * * *": hour field "25": end of range (25) above maximum (23): 25`,
		}},
		{`//simba:scheduled lease=x cron="61 * * * *"`, []string{
			`33: cron: cron="61 * * * *": minute field "61": end of range (61) above maximum (59): 61`,
		}},
		{`//simba:scheduled lease=x cron="* * *"`, []string{
			`33: cron: cron="* * *": 3 fields; want 5 (minute hour day-of-month month day-of-week) or 6 (second first)`,
		}},
		{`//simba:scheduled lease=x cron="TZ=Europe/Paris * * * * *"`, []string{
			`33: cron: cron="TZ=Europe/Paris * * * * *": a time zone prefix is not accepted; give the location separately (Schedule.Location, or tz= in a directive)`,
		}},
		{`//simba:scheduled lease=x cron=@often`, []string{
			`32: cron: cron=@often: unknown descriptor; want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly (for a fixed interval, use a rate)`,
		}},
		{`//simba:scheduled lease=x cron="0 * * * *`, []string{
			`1: rate: //simba:scheduled needs rate=DURATION (a fixed rate), delay=DURATION (a fixed delay after each run) or cron="EXPRESSION"`,
			`32: : unterminated or invalid quoted value "0 * * * *; want a Go string literal such as "0 */5 * * * *"`,
		}},
		{`//simba:scheduled lease=x cron=@daily tz=Mars/Olympus overlap=sometimes catchup=-1s`, []string{
			`42: tz: tz=Mars/Olympus: unknown time zone; want an IANA time zone name, such as Europe/Paris`,
			`63: overlap: overlap=sometimes: want skip or after`,
			`81: catchup: catchup=-1s: want a duration >= 0, such as 1m`,
		}},
		{`//simba:scheduled lease=x cron=@daily tz=Local`, []string{
			`42: tz: tz=Local: want an IANA time zone name, such as Europe/Paris; the local zone differs between nodes`,
		}},
		{`//simba:scheduled lease=x rate=1s tz=UTC catchup=1s`, []string{
			`35: tz: tz= applies to cron= schedules only`,
			`42: catchup: catchup= applies to cron= schedules only`,
		}},
		{`//simba:scheduled lease=x rate=1s cron=@daily`, []string{
			`35: cron: rate=, delay= and cron= exclude each other; want one: rate= for a fixed rate, delay= for a fixed delay after each run, cron= for a cron expression`,
		}},
		{"//simba:scheduled lease rate=1s", []string{
			`1: lease: //simba:scheduled needs lease=NAME`,
			`19: : argument "lease" is not key=value`,
		}},
		{"//simba:scheduled =x lease=x rate=1s", []string{`19: : argument "=x" has no key`}},
		{"//simba:scheduled lease= rate=", []string{
			`25: lease: lease= has no value; want a lease name (1 to 128 characters of [A-Za-z0-9._:-])`,
			`31: rate: rate= has no value; want a duration of at least 1ms, such as 5m`,
		}},
		{"//simba:scheduled lease=a/b rate=1s", []string{
			`25: lease: lease=a/b: invalid lease name: character '/' at byte 1; want only [A-Za-z0-9._:-]`,
		}},
		{"//simba:scheduled lease=.. rate=1s", []string{
			`25: lease: lease=..: invalid lease name: "." and ".." are reserved`,
		}},
		{`//simba:scheduled lease="x" rate=1s`, []string{
			`25: lease: lease="x": invalid lease name: character '"' at byte 0; want only [A-Za-z0-9._:-]`,
		}},
		{"//simba:scheduled lease=" + strings.Repeat("x", 129) + " rate=1s", []string{
			`25: lease: lease=` + strings.Repeat("x", 129) + `: invalid lease name: 129 bytes long; want at most 128`,
		}},
		{"//simba:scheduled lease=x rate=5x", []string{
			`32: rate: rate=5x: time: unknown unit "x" in duration "5x"; want a duration of at least 1ms, such as 5m`,
		}},
		{"//simba:scheduled lease=x rate=0s", []string{`32: rate: rate=0s: want a duration of at least 1ms, such as 5m`}},
		{"//simba:scheduled lease=x rate=500us", []string{`32: rate: rate=500us: want a duration of at least 1ms, such as 5m`}},
		{"//simba:scheduled lease=x rate=1500us", []string{`32: rate: rate=1500us: want a whole number of milliseconds (a rate's slots are counted in milliseconds of the store's clock)`}},
		{"//simba:scheduled lease=x delay=-1s", []string{`33: delay: delay=-1s: want a duration of at least 1ms, such as 30s`}},
		{"//simba:scheduled lease=x rate=1s initial=-1s step=x", []string{
			`43: initial: initial=-1s: want a duration >= 0, such as 10s`,
			`52: step: step=x: time: invalid duration "x"; want a duration >= 0, such as 2s`,
		}},
		{"//simba:scheduled lease=x rate=1s items=1x", []string{
			`41: items: items=1x: want the name of the function or method that yields the items`,
		}},
		{"//simba:scheduled lease=x rate=1s items=func", []string{
			`41: items: items=func: want the name of the function or method that yields the items`,
		}},
		{"//simba:scheduled lease=x rate=1s items=a.B", []string{
			`41: items: items=a.B: want the name of the function or method that yields the items`,
		}},
		{"//simba:partitioned group=g", []string{
			`1: partitions: //simba:partitioned needs partitions=N, N from 1 to 65536`,
		}},
		{"//simba:partitioned group=g partitions=0", []string{`40: partitions: partitions=0: want a decimal number from 1 to 65536`}},
		{"//simba:partitioned group=g partitions=65537", []string{`40: partitions: partitions=65537: want a decimal number from 1 to 65536`}},
		{"//simba:partitioned group=g partitions=+3", []string{`40: partitions: partitions=+3: want a decimal number from 1 to 65536`}},
		{"//simba:partitioned group=g partitions=0x10", []string{`40: partitions: partitions=0x10: want a decimal number from 1 to 65536`}},
		{"//simba:partitioned group=" + long + " partitions=65536", []string{
			`27: group: group=` + long + `: group name too long for 65536 partitions: partition lease "` + long + `.65535" is 129 bytes; want at most 128`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.comment, func(t *testing.T) {
			d, err := Parse(tt.comment)
			if d != nil {
				t.Fatalf("Parse = %v; want an error", d)
			}
			list, ok := err.(ErrorList)
			if !ok {
				t.Fatalf("Parse error = %#v; want an ErrorList", err)
			}
			var got []string
			for _, e := range list {
				got = append(got, fmt.Sprintf("%d: %s: %s", e.Offset+1, e.Key, e.Msg))
			}
			if diff := diffLines(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// G1: "// simba:" with a space is an ordinary comment for Go; the generator
// warns about it.
func TestNearMiss(t *testing.T) {
	tests := []struct{ comment, want string }{
		{"// simba:scheduled lease=x rate=1s", `"// simba:scheduled" is an ordinary comment, not a directive, because of the space after //; write //simba:scheduled`},
		{"//\tsimba:partitioned group=g", `"// simba:partitioned" is an ordinary comment, not a directive, because of the space after //; write //simba:partitioned`},
		{"// Simba:scheduled", `"// Simba:scheduled" is an ordinary comment, not a directive, because of the space after //; write //simba:scheduled`},
		{"//SIMBA:scheduled lease=x", `"//SIMBA:scheduled" is an ordinary comment, not a directive: directives are lower case; write //simba:scheduled`},
		{"//simba:scheduled lease=x rate=1s", ""},
		{"// Simba runs this on one node.", ""},
		{"// simba", ""},
		{"/* simba:scheduled */", ""},
	}
	for _, tt := range tests {
		var got string
		if e := NearMiss(tt.comment); e != nil {
			got = e.Msg
		}
		if got != tt.want {
			t.Errorf("NearMiss(%q) = %q; want %q", tt.comment, got, tt.want)
		}
	}
}

func TestErrorList(t *testing.T) {
	_, err := Parse("//simba:scheduled lease=a/b rate=x")
	want := `column 25: lease=a/b: invalid lease name: character '/' at byte 1; want only [A-Za-z0-9._:-] (and 1 more errors)`
	if err == nil || err.Error() != want {
		t.Errorf("Error() = %v; want %s", err, want)
	}
}

// G4: parsing the canonical form of an accepted directive gives the same
// directive, and the canonical form is a fixed point.
func checkRoundTrip(t *testing.T, comment string) {
	d, err := Parse(comment)
	if err != nil {
		if _, ok := err.(ErrorList); !ok {
			t.Fatalf("Parse(%q): error %T, want ErrorList", comment, err)
		}
		return
	}
	if d == nil {
		return
	}
	canon := d.String()
	d2, err := Parse(canon)
	if err != nil {
		t.Fatalf("Parse(%q) accepted, but its canonical form %q fails: %v", comment, canon, err)
	}
	if !d.Equal(d2) {
		t.Fatalf("Parse(%q) = %+v, but Parse(%q) = %+v", comment, *d, canon, *d2)
	}
	if again := d2.String(); again != canon {
		t.Fatalf("canonical form not a fixed point: %q, then %q", canon, again)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"//simba:scheduled lease=report rate=5m step=2s",
		"//simba:partitioned group=billing partitions=16 delay=30s step=1s",
		"//simba:scheduled lease=ledger rate=1m step=2s items=PendingBatches",
		"//simba:partitioned group=g partitions=3 initial=1.5s items=Next",
		"//simba:schedule lease=x",
		"// simba:scheduled lease=x rate=1s",
		"//simba:scheduled lease=x rate=1s rate=2s colour=red",
		`//simba:scheduled lease=report cron="0 */5 * * * *" tz=Europe/Paris overlap=after catchup=1m`,
		`//simba:scheduled lease=x cron="\t0 *\x20* * *" overlap=skip`,
		`//simba:partitioned group=g partitions=2 cron=@hourly tz=UTC`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, comment string) {
		checkRoundTrip(t, comment)
		NearMiss(comment) // must not panic
	})
}

// diffLines returns a line diff of want and got, "" if they are equal.
func diffLines(want, got []string) string {
	var b strings.Builder
	for i := 0; i < max(len(want), len(got)); i++ {
		switch {
		case i >= len(got):
			fmt.Fprintf(&b, "-%s\n", want[i])
		case i >= len(want):
			fmt.Fprintf(&b, "+%s\n", got[i])
		case want[i] != got[i]:
			fmt.Fprintf(&b, "-%s\n+%s\n", want[i], got[i])
		}
	}
	return b.String()
}
