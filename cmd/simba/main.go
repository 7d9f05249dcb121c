package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/simba-go/simba/backends"
	_ "github.com/simba-go/simba/backends/all" // every store a URL may name
	"github.com/simba-go/simba/backends/backendurl"
	simbaredis "github.com/simba-go/simba/backends/redis"
)

// Exit codes, for scripts.
const (
	exitOK      = 0 // done
	exitFailed  = 1 // the backend could not be opened or read
	exitUsage   = 2 // unknown command, bad flag or flag value, no backend given
	exitNotHeld = 3 // status --lease NAME: nobody holds NAME (or any partition of group NAME); handover: nobody holds the lease

	exitNotCandidate = 4 // handover: the successor named does not contend with runtime.AcceptHandOver
)

// backendEnv names the backend URL when --backend is not given.
const backendEnv = "SIMBA_BACKEND"

func main() {
	// go-redis writes some failures (a dial that failed) to standard error
	// through a process-wide logger; the command reports every failure
	// itself, once, with the URL redacted.
	simbaredis.SetDriverLogger(nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, isTerminal(os.Stdout))
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a terminal (a character device), where
// watch redraws its table in place.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const usage = `simba shows the leases, holders and sessions a Simba backend holds. status and
watch only read; handover, the one command that writes, asks a leader to hand
its lease over to a chosen node (its election must accept requests).

usage:
  simba status   [--backend URL] [--json] [--lease NAME] [--timeout D]
  simba watch    [--backend URL] [--json] [--lease NAME] [--timeout D]
                 [--interval D] [--count N] [--for D] [--plain]
  simba handover [--backend URL] --lease NAME --to IDENTITY [--timeout D]

The backend URL comes from --backend or $SIMBA_BACKEND: redis://host:6379/0,
postgres://…, zk://…, memory:NAME (in-process only). Credentials in it are
never printed.

exit codes: 0 ok; 1 the backend could not be opened or read, or the hand-over
did not happen in time; 2 usage; 3 status --lease NAME or handover: nobody holds
NAME; 4 handover: the node named does not contend for the lease.
Run 'simba help' for this text, or see 'go doc github.com/simba-go/simba/cmd/simba'.
`

// run is the command: args without the program name, getenv for
// $SIMBA_BACKEND, output to stdout and stderr; tty says whether stdout is
// a terminal. It returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, tty bool) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "status", "watch":
	case "handover":
		return handOverCommand(ctx, args, getenv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "simba: unknown command %q; want status, watch or handover\n\n%s", cmd, usage)
		return exitUsage
	}
	fs := flag.NewFlagSet("simba "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.backend, "backend", getenv(backendEnv), "the backend `URL` (default $"+backendEnv+")")
	fs.BoolVar(&o.json, "json", false, "print JSON (watch: one JSON object per line)")
	fs.StringVar(&o.lease, "lease", "", "show only the lease `NAME`, or the partitions of the group NAME")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "bound each connection and read of the backend")
	if cmd == "watch" {
		fs.DurationVar(&o.interval, "interval", time.Second, "read the backend every `D`")
		fs.IntVar(&o.count, "count", 0, "stop after `N` reads (0: until interrupted)")
		fs.DurationVar(&o.duration, "for", 0, "stop after `D` (0: until interrupted)")
		fs.BoolVar(&o.plain, "plain", false, "print changes line by line even on a terminal")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if err := o.check(fs); err != nil {
		fmt.Fprintf(stderr, "simba %s: %v\n", cmd, err)
		return exitUsage
	}
	o.shown = backendurl.Redact(o.backend)
	if cmd == "watch" {
		return watch(ctx, o, stdout, stderr, tty && !o.plain && !o.json)
	}
	return status(ctx, o, stdout, stderr)
}

// options are the flags of status and watch.
type options struct {
	backend  string
	shown    string // backend, redacted
	json     bool
	lease    string
	timeout  time.Duration
	interval time.Duration
	count    int
	duration time.Duration
	plain    bool
}

func (o options) check(fs *flag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q; flags only", fs.Arg(0))
	case o.backend == "":
		return fmt.Errorf("no backend: give --backend URL or set $%s", backendEnv)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %v: want > 0", o.timeout)
	case o.lease != "" && backends.ValidateName(o.lease) != nil:
		return fmt.Errorf("--lease: %v", backends.ValidateName(o.lease))
	case fs.Name() == "simba watch" && o.interval < 10*time.Millisecond:
		return fmt.Errorf("--interval %v: want at least 10ms", o.interval)
	case o.count < 0:
		return fmt.Errorf("--count %d: want >= 0", o.count)
	case o.duration < 0:
		return fmt.Errorf("--for %v: want >= 0", o.duration)
	}
	return nil
}

// reader reads a backend's inventory.
type reader struct {
	o   options
	ins backends.Inspector
	c   io.Closer
}

// open opens the backend the options name, and checks that it can list
// what it holds.
func open(ctx context.Context, o options) (*reader, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ins, c, err := backendurl.OpenInspector(ctx, o.backend)
	if err != nil {
		return nil, err // backendurl and the backends name the URL, redacted
	}
	return &reader{o: o, ins: ins, c: c}, nil
}

// read lists the store, within the timeout.
func (r *reader) read(ctx context.Context) (Inventory, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.timeout)
	defer cancel()
	inv, err := r.ins.Inspect(ctx)
	if err != nil {
		return Inventory{}, fmt.Errorf("reading %s: %w", r.o.shown, err)
	}
	out := newInventory(r.o.shown, inv)
	if r.o.lease != "" {
		out = out.only(r.o.lease)
	}
	return out, nil
}

func (r *reader) Close() error { return r.c.Close() }

// status prints the inventory once.
func status(ctx context.Context, o options, stdout, stderr io.Writer) int {
	r, err := open(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	defer r.Close()
	inv, err := r.read(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "simba:", err)
		return exitFailed
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(inv)
	} else {
		writeTable(stdout, inv)
	}
	if o.lease != "" && len(inv.Leases) == 0 {
		fmt.Fprintf(stderr, "simba: nobody holds %q\n", o.lease)
		return exitNotHeld
	}
	return exitOK
}
