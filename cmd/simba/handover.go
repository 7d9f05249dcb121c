package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/runtime"
)

// handOverOptions are the flags of handover.
type handOverOptions struct {
	backend string
	shown   string // backend, redacted
	lease   string
	to      string
	timeout time.Duration
}

// handOverCommand parses handover's flags and runs it.
func handOverCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simba handover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o handOverOptions
	fs.StringVar(&o.backend, "backend", getenv(backendEnv), "the backend `URL` (default $"+backendEnv+")")
	fs.StringVar(&o.lease, "lease", "", "the election's lease `NAME`")
	fs.StringVar(&o.to, "to", "", "the `IDENTITY` of the node to hand the lease over to")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after `D`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if err := o.check(fs); err != nil {
		fmt.Fprintf(stderr, "simba handover: %v\n", err)
		return exitUsage
	}
	o.shown = backendurl.Redact(o.backend)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return handOver(ctx, o, stdout, stderr)
}

func (o handOverOptions) check(fs *flag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q; flags only", fs.Arg(0))
	case o.backend == "":
		return fmt.Errorf("no backend: give --backend URL or set $%s", backendEnv)
	case o.lease == "":
		return errors.New("no lease: give --lease NAME, the election's lease")
	case backends.ValidateName(o.lease) != nil:
		return fmt.Errorf("--lease: %v", backends.ValidateName(o.lease))
	case backends.ValidateName(runtime.HandOverRequestName(o.lease)) != nil:
		return fmt.Errorf("--lease %q: too long for its request lease %q", o.lease, runtime.HandOverRequestName(o.lease))
	case o.to == "":
		return errors.New("no successor: give --to IDENTITY, the identity of the node to hand over to")
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %v: want > 0", o.timeout)
	}
	return nil
}

// handOver asks the leader of o.lease to hand it over to o.to: it checks
// that the lease is held and that o.to contends with runtime.AcceptHandOver,
// then holds the request lease (runtime.HandOverRequestName) with the
// identity runtime.HandOverRequestIdentity(o.to) until o.to holds the lease
// or ctx ends, and releases it.
func handOver(ctx context.Context, o handOverOptions, stdout, stderr io.Writer) int {
	b, closer, err := backendurl.Open(ctx, o.backend)
	if err != nil {
		fmt.Fprintln(stderr, "simba handover:", err) // backendurl and the backends name the URL, redacted
		return exitFailed
	}
	defer closer.Close()
	if ins, ok := b.(backends.Inspector); ok {
		if code, done := checkHandOver(ctx, o, ins, stdout, stderr); done {
			return code
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := runtime.NewClient(b, runtime.DefaultConfig(),
		runtime.WithIdentity(runtime.HandOverRequestIdentity(o.to)), runtime.WithLogger(logger))
	if err != nil {
		fmt.Fprintf(stderr, "simba handover: %s: %v\n", o.shown, err)
		return exitFailed
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(closeCtx) // releases the request, if still held
	}()
	request := runtime.HandOverRequestName(o.lease)
	term, err := c.Lock(ctx, request)
	if err != nil {
		fmt.Fprintf(stderr, "simba handover: %s: asking for the hand-over (lease %s): %v\n", o.shown, request, err)
		return exitFailed
	}
	defer c.Unlock(context.Background(), term)
	holders, err := c.WatchHolder(ctx, o.lease)
	if err != nil {
		fmt.Fprintf(stderr, "simba handover: %s: %v\n", o.shown, err)
		return exitFailed
	}
	var last runtime.Holder
	for h := range holders {
		last = h
		if h.Identity == o.to {
			fmt.Fprintf(stdout, "%s: handed over to %s (session %s), token %d\n", o.lease, o.to, h.Session, h.Token)
			return exitOK
		}
	}
	fmt.Fprintf(stderr, "simba handover: %s: not handed over within %v (%s); the leader hands over on request only "+
		"if its election runs with runtime.AcceptHandOverRequests (off by default)\n", o.lease, o.timeout, last)
	return exitFailed
}

// checkHandOver reads the store before anything is written: it returns
// done with an exit code if there is nothing to do (o.to already holds the
// lease) or nothing can be done (nobody holds it; o.to does not contend).
func checkHandOver(ctx context.Context, o handOverOptions, ins backends.Inspector, stdout, stderr io.Writer) (code int, done bool) {
	inv, err := ins.Inspect(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "simba handover: reading %s: %v\n", o.shown, err)
		return exitFailed, true
	}
	successor := runtime.SuccessorName(o.lease, o.to)
	var holder, candidate *backends.LeaseInfo
	for i, l := range inv.Leases {
		switch l.Name {
		case o.lease:
			holder = &inv.Leases[i]
		case successor:
			candidate = &inv.Leases[i]
		}
	}
	switch {
	case holder == nil:
		fmt.Fprintf(stderr, "simba handover: nobody holds %q; nothing changed\n", o.lease)
		return exitNotHeld, true
	case holder.Identity == o.to:
		fmt.Fprintf(stdout, "%s: already held by %s (session %s), token %d\n", o.lease, o.to, holder.Session, holder.Token)
		return exitOK, true
	case candidate == nil || candidate.Identity != o.to:
		fmt.Fprintf(stderr, "simba handover: %q does not contend for %q with runtime.AcceptHandOver (no live session of "+
			"that identity holds %s); nothing changed\n", o.to, o.lease, successor)
		return exitNotCandidate, true
	}
	return 0, false
}
