// Package annotations parses and validates the simba directives (§14,
// rules G1 and G4) on their own, without loading any Go code. The generator,
// cmd/simbagen (run from a //go:generate go tool simbagen line), uses it; so
// can any tool that wants to read the directives.
//
// Rule names such as G1, and sections such as §14, refer to docs/design.md
// in the repository.
//
// # Grammar
//
// A directive is one line comment, in Go's directive form: "//" followed at
// once (no space) by the tool, a colon and the directive's name, then
// arguments separated by white space.
//
//	directive = "//simba:" name { space argument } .
//	name      = "scheduled" | "partitioned" .
//	argument  = key "=" value .
//	key       = "lease" | "group" | "partitions" | "rate" | "delay" | "cron" | "tz" | "overlap" |
//	            "catchup" | "initial" | "step" | "items" .
//	value     = { any character but white space } | go_string_literal .
//
// Keys are case-sensitive; each key appears at most once, in any order. A
// value is a word, or a Go string literal in double quotes, which may hold
// spaces: cron="0 */5 * * * *".
//
//	//simba:scheduled lease=NAME (rate=DURATION | delay=DURATION | cron=EXPR [tz=ZONE] [overlap=skip|after] [catchup=DURATION])
//	                  [initial=DURATION] [step=DURATION] [items=SOURCE]
//	//simba:partitioned group=NAME partitions=N [rate=DURATION | delay=DURATION | cron=EXPR [tz=ZONE] [overlap=skip|after] [catchup=DURATION]]
//	                  [initial=DURATION] [step=DURATION] [items=SOURCE]
//
// # Keys
//
//	lease=NAME        //simba:scheduled only, required. The lease the schedule runs under:
//	                  1 to 128 characters of [A-Za-z0-9._:-], neither "." nor ".." (T1).
//	group=NAME        //simba:partitioned only, required. The partition group; partition i
//	                  is the lease NAME.i, and the longest of those, NAME.(N-1), must
//	                  be a valid lease name too.
//	partitions=N      //simba:partitioned only, required. A decimal number from 1 to 65536.
//	rate=DURATION     Run at a fixed rate, once per slot of this length on the store's
//	                  clock. At least 1ms.
//	delay=DURATION    Run this long after the previous run ended. At least 1ms.
//	cron=EXPR         Run at the instants a cron expression names (R1): five fields
//	                  (minute hour day-of-month month day-of-week) or six with seconds
//	                  first, quoted when it has spaces, or a descriptor such as @daily
//	                  (not @every; no TZ= prefix). A malformed one is an error at the
//	                  field at fault: hour field "25": end of range (25) above maximum (23).
//	                  A schedule needs exactly one of rate, delay and cron; a
//	                  partitioned task may have none, and then runs once per term of
//	                  each partition it holds.
//	tz=ZONE           cron= only. The IANA time zone cron's wall-clock times are read in,
//	                  such as Europe/Paris; default UTC; never Local (R4 for daylight
//	                  saving).
//	overlap=POLICY    cron= only. skip (the default): a slot that comes while a run goes
//	                  on is skipped; after: the latest such slot runs when it returns (R3).
//	catchup=DURATION  cron= only. After a fail-over or a pause, the latest missed slot
//	                  runs once if it is at most this old, else it is skipped (R3).
//	                  Default 0: no missed slot runs.
//	initial=DURATION  Wait this long after each election before the first run.
//	                  Default 0.
//	step=DURATION     The validity a step needs: the minimum passed to
//	                  Term.EnsureValid before every run and every item (E1).
//	                  Default 0.
//	items=SOURCE      Typed steps (G2): SOURCE is a Go identifier, the function
//	                  (or method of the same receiver) that yields the work items.
//
// Durations are written as [time.ParseDuration] reads them ("90s", "1m30s",
// "250ms"); rate and delay must be positive, catchup, initial and step must
// not be negative.
//
// # Near misses
//
// Go reads "// simba:scheduled" (with a space) as an ordinary comment, not
// as a directive; [NearMiss] reports it, and "//Simba:…" too, as a warning,
// and [Parse] ignores it. A misspelt directive name, such as
// "//simba:schedule", is an error with a hint.
//
// # Canonical form
//
// [Directive.String] prints a directive in canonical form: the name key
// first, then partitions, rate or delay or cron (quoted), tz, overlap,
// catchup, initial, step and items, with durations as [time.Duration.String]
// prints them and the keys whose value is the default left out. Parsing the canonical form of a directive gives
// the same directive.
package annotations
