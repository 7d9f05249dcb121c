package engine

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Golden traces, in the style of etcd raft's datadriven interaction tests:
// each file under testdata/trace scripts one machine — inputs at scripted
// times, scripted backend replies — and holds, under each command, the
// effects it produced, one line each (describe.go), and the next wake-up.
// go test -run TestTraces -rewrite writes the files anew from what the
// machine does; review the diff.

var rewrite = flag.Bool("rewrite", false, "rewrite the golden traces under testdata/trace from the machine's output")

// traceCase is one command of a script and the output it must produce.
type traceCase struct {
	line int
	cmd  string
	want string
}

// readTrace reads a script: blocks of "command" then "----" then the
// expected lines, up to a blank line. Lines starting with "#" outside a
// block are comments.
func readTrace(path string) (cases []traceCase, comments map[int][]string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	comments = map[int][]string{}
	sc := bufio.NewScanner(f)
	n := 0
	var pending []string
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			pending = append(pending, line)
			continue
		}
		c := traceCase{line: n, cmd: line}
		comments[len(cases)] = pending
		pending = nil
		if !sc.Scan() || sc.Text() != "----" {
			return nil, nil, fmt.Errorf("%s:%d: want ---- after the command", path, n)
		}
		n++
		var want []string
		for sc.Scan() {
			n++
			if sc.Text() == "" {
				break
			}
			want = append(want, sc.Text())
		}
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	comments[len(cases)] = pending
	return cases, comments, sc.Err()
}

func writeTrace(path string, cases []traceCase, comments map[int][]string, got []string) error {
	var b strings.Builder
	for i, c := range cases {
		for _, l := range comments[i] {
			b.WriteString(l + "\n")
		}
		b.WriteString(c.cmd + "\n----\n")
		if got[i] != "" {
			b.WriteString(got[i] + "\n")
		}
		b.WriteString("\n")
	}
	for _, l := range comments[len(cases)] {
		b.WriteString(l + "\n")
	}
	return os.WriteFile(path, []byte(strings.TrimRight(b.String(), "\n")+"\n"), 0o644)
}

func TestTraces(t *testing.T) {
	paths, err := filepath.Glob("testdata/trace/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cases, comments, err := readTrace(path)
			if err != nil {
				t.Fatal(err)
			}
			var s script
			got := make([]string, len(cases))
			for i, c := range cases {
				out, err := s.run(c.cmd)
				if err != nil {
					t.Fatalf("%s:%d: %s: %v", path, c.line, c.cmd, err)
				}
				got[i] = out
				if !*rewrite && out != c.want {
					t.Errorf("%s:%d: %s\n--- want\n%s\n--- got\n%s", path, c.line, c.cmd, c.want, out)
				}
			}
			if *rewrite {
				if err := writeTrace(path, cases, comments, got); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// script runs trace commands against one machine.
type script struct {
	m   *Machine
	now Mono
}

func (s *script) run(line string) (string, error) {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	kv := map[string]string{}
	var words []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			words = append(words, a)
		}
	}
	has := func(w string) bool {
		for _, x := range words {
			if x == w {
				return true
			}
		}
		return false
	}
	dur := func(k string) time.Duration {
		d, _ := time.ParseDuration(kv[k])
		return d
	}
	num := func(s string) uint64 {
		n, _ := strconv.ParseUint(strings.TrimLeft(s, "cgtw#"), 10, 64)
		return n
	}
	word := func(i int) string {
		if i < len(words) {
			return words[i]
		}
		return ""
	}
	if s.m == nil && cmd != "new" {
		return "", errors.New("the script must begin with new")
	}
	var in Input
	switch cmd {
	case "new":
		cfg := testCfg
		if _, ok := kv["lease"]; ok {
			cfg.LeaseDuration = dur("lease")
		}
		if _, ok := kv["renew"]; ok {
			cfg.RenewInterval = dur("renew")
		}
		if _, ok := kv["jitter"]; ok {
			cfg.RetryJitter = dur("jitter")
		}
		seed := uint64(1)
		if v, ok := kv["seed"]; ok {
			seed, _ = strconv.ParseUint(v, 10, 64)
		}
		s.m = New(cfg, seed)
		s.m.Tick(0)
		return s.ready(), nil
	case "tick":
		d, err := time.ParseDuration(word(0))
		if err != nil {
			return "", err
		}
		if d < s.now {
			return "", fmt.Errorf("time goes backwards: %v → %v", s.now, d)
		}
		s.now = d
		s.m.Tick(d)
		return s.ready(), nil
	case "start":
		st := Start{ID: ContenderID(num(word(0))), Name: word(2), Listener: has("listener"), Task: has("task"),
			TryOnce: has("try-once"), Waiter: Waiter(num(kv["w"])), TaskEndCooldown: s.m.cfg.RenewInterval}
		switch word(1) {
		case "election":
			st.Kind = KindElection
		case "lock":
			st.Kind = KindLock
		case "schedule":
			st.Kind = KindSchedule
			st.Schedule = vocab.Schedule{Rate: dur("rate"), Delay: dur("delay"), Initial: dur("initial"), Step: dur("step")}
		default:
			return "", fmt.Errorf("unknown kind %q", word(1))
		}
		in = st
	case "start-group":
		in = StartGroup{ID: GroupID(num(word(0))), Name: word(1), N: int(num(kv["n"])),
			Schedule: vocab.Schedule{Rate: dur("rate"), Delay: dur("delay"), Initial: dur("initial"), Step: dur("step")}}
	case "stop":
		_, stepDown := kv["step-down"]
		in = Stop{ID: ContenderID(num(word(0))), StepDown: stepDown, Cooldown: dur("step-down"), Waiter: Waiter(num(kv["w"]))}
	case "stop-group":
		_, stepDown := kv["step-down"]
		in = StopGroup{ID: GroupID(num(word(0))), StepDown: stepDown, Cooldown: dur("step-down"), Waiter: Waiter(num(kv["w"]))}
	case "unlock":
		in = Unlock{Term: TermID(num(word(0))), Waiter: Waiter(num(kv["w"]))}
	case "abandon":
		in = Abandon{ID: ContenderID(num(word(0)))}
	case "close":
		in = Close{Waiter: Waiter(num(kv["w"]))}
	case "reply":
		res, err := parseResult(kv)
		if err != nil {
			return "", err
		}
		in = Reply{ID: RequestID(num(word(0))), Result: res}
	case "released":
		in = Released{Gen: num(kv["gen"]), Name: word(0)}
	case "task-done":
		in = TaskDone{Term: TermID(num(word(0))), Err: traceErr(kv["err"]), Canceled: has("canceled")}
	case "run-done":
		in = RunDone{Term: TermID(num(word(0))), Err: traceErr(kv["err"]), Canceled: has("canceled")}
	case "callback-done":
		in = CallbackDone{ID: ContenderID(num(word(0)))}
	case "dispatch-failed":
		in = DispatchFailed{ID: ContenderID(num(word(0))), Term: TermID(num(word(1))), Err: errors.New("pool full")}
	default:
		return "", fmt.Errorf("unknown command %q", cmd)
	}
	if err := s.m.Step(s.now, in); err != nil {
		return "error: " + err.Error() + "\n" + s.ready(), nil
	}
	return s.ready(), nil
}

// ready prints the machine's effects and its next wake-up.
func (s *script) ready() string {
	effs, wake, ok := s.m.Ready()
	var b strings.Builder
	for _, e := range effs {
		b.WriteString(DescribeEffect(e) + "\n")
	}
	if ok {
		fmt.Fprintf(&b, "wake %v", wake)
	} else {
		b.WriteString("wake never")
	}
	return b.String()
}

// The errors a script can name.
var traceErrors = map[string]error{
	"down":      errDown,
	"held":      fmt.Errorf("held by another session: %w", backends.ErrLeaseHeld),
	"expired":   fmt.Errorf("gone: %w", backends.ErrSessionExpired),
	"notholder": fmt.Errorf("not the holder: %w", backends.ErrNotHolder),
	"failed":    errors.New("the run failed"),
}

func traceErr(name string) error {
	if name == "" {
		return nil
	}
	if err, ok := traceErrors[name]; ok {
		return err
	}
	return errors.New(name)
}

// parseResult reads a reply: session=, remaining=, digest=L/V[/G],
// store-time= (seconds since the epoch), token=, value=, held=name#token,…,
// members=a,b with holders=x,- (a group view; "-" is free), err=,
// held-for= (a HeldError whose holder has that much left).
func parseResult(kv map[string]string) (Result, error) {
	var r Result
	r.Session = backends.SessionID(kv["session"])
	if v, ok := kv["remaining"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return r, err
		}
		r.Renewal.Remaining = d
	}
	if v, ok := kv["digest"]; ok {
		parts := strings.Split(v, "/")
		var d backends.Digest
		if len(parts) > 0 {
			d.Leases, _ = strconv.Atoi(parts[0])
		}
		if len(parts) > 1 {
			d.Version, _ = strconv.ParseUint(parts[1], 10, 64)
		}
		if len(parts) > 2 {
			d.Groups, _ = strconv.ParseUint(parts[2], 10, 64)
		}
		r.Renewal.Digest, r.Digest, r.Grant.Digest = d, d, d
	}
	if v, ok := kv["store-time"]; ok {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return r, err
		}
		at := time.UnixMilli(int64(sec * 1000))
		r.Renewal.StoreTime, r.StoreTime = at, at
	}
	if v, ok := kv["token"]; ok {
		n, _ := strconv.ParseInt(v, 10, 64)
		r.Grant.Token = Token(n)
	}
	if v, ok := kv["value"]; ok {
		r.Grant.Value = []byte(strings.ReplaceAll(v, "_", " "))
	}
	if v, ok := kv["held"]; ok {
		for _, h := range strings.Split(v, ",") {
			name, tok, _ := strings.Cut(h, "#")
			n, _ := strconv.ParseInt(tok, 10, 64)
			r.Held = append(r.Held, backends.Held{Name: name, Token: Token(n)})
		}
	}
	if v, ok := kv["members"]; ok {
		for _, m := range strings.Split(v, ",") {
			r.View.Members = append(r.View.Members, backends.SessionID(m))
		}
		for _, h := range strings.Split(kv["holders"], ",") {
			r.View.Holders = append(r.View.Holders, backends.SessionID(strings.Trim(h, "-")))
		}
	}
	r.Err = traceErr(kv["err"])
	if v, ok := kv["held-for"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return r, err
		}
		r.Err = &backends.HeldError{Holder: backends.Holder{Session: "other", Remaining: d}}
	}
	return r, nil
}
