// Command compare runs Simba's backends and the peer libraries through one
// harness (package bench) and prints one Markdown table: graceful hand-off,
// crash fail-over, requests per renewal and uncontended acquire+release,
// with its ratio to a raw round trip of the same store and, on Redis, the
// server's CPU per pair.
//
// Usage, from the repository's root:
//
//	make compare                       # the full run, about 15 minutes
//	cd bench && go run ./cmd/compare [flags]
//
// The flags size the run (the defaults are bench/README.md's table) and pick rows:
//
//	-readme FILE   also write the table into FILE between its compare markers
//	               (make compare: bench/README.md), unless -only or -quick
//	-only REGEXP   rows whose name or store matches ("Redis", "simba|redislock")
//	-quick         every measurement once or twice (what the smoke test runs)
//	-redis ADDR    use this Redis instead of a private redis-server
//	-handoffs N -failovers N -pairs N -rounds N -window PERIODS -sizes 1,100,1000
//
// Progress goes to stderr, the table to stdout. It exits 1 if a row failed a
// measurement (the table says which) and 2 on a usage error.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/bench"
)

func main() {
	os.Exit(run())
}

// quiet discards go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func run() int {
	full := bench.FullOptions()
	var (
		readme    = flag.String("readme", "", "write the table into this Markdown file, between its compare markers (a full run only)")
		only      = flag.String("only", "", "run only the rows whose name or store matches this regular expression")
		quick     = flag.Bool("quick", false, "run every measurement once or twice (a smoke run; the figures mean nothing)")
		redisAddr = flag.String("redis", "", "the Redis of the Redis rows (default: a private redis-server on a free port)")
		handOffs  = flag.Int("handoffs", full.HandOffs, "graceful hand-offs per row")
		failOvers = flag.Int("failovers", full.FailOvers, "crash fail-overs per row")
		pairs     = flag.Int("pairs", full.Pairs, "acquire+release pairs per round")
		rounds    = flag.Int("rounds", full.Rounds, "acquire+release rounds")
		window    = flag.Int("window", full.Window, "renewal periods over which requests are counted")
		sizes     = flag.String("sizes", "1,100,1000", "leases held while requests are counted, comma-separated")
	)
	flag.Parse()
	redis.SetLogger(quiet{}) // go-redis logs every failed dial of a crashed node to its global logger
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "compare: unexpected arguments %q\n", flag.Args())
		return 2
	}
	o := bench.Options{HandOffs: *handOffs, FailOvers: *failOvers, Pairs: *pairs, Rounds: *rounds, Window: *window}
	if *quick {
		o = bench.QuickOptions()
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintf(os.Stderr, "compare: -only: %v\n", err)
			return 2
		}
		o.Only = re
	}
	if !*quick {
		for s := range strings.SplitSeq(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "compare: -sizes: %q is not a positive integer\n", s)
				return 2
			}
			o.Sizes = append(o.Sizes, n)
		}
	}
	start := time.Now()
	o.Progress = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	env := bench.NewEnv()
	env.RedisAddr = *redisAddr
	env.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	defer env.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows := bench.Run(ctx, env, bench.Impls(), o)
	var table bytes.Buffer
	bench.Markdown(&table, rows, o)
	os.Stdout.Write(table.Bytes())
	switch {
	case *readme == "":
	case *only != "" || *quick:
		fmt.Fprintf(os.Stderr, "compare: a partial run (-only or -quick) leaves %s as it is\n", *readme)
	default:
		if err := bench.WriteReadme(*readme, table.Bytes(), start); err != nil {
			fmt.Fprintf(os.Stderr, "compare: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "compare: wrote the table into %s\n", *readme)
	}
	fmt.Fprintf(os.Stderr, "[%6.1fs] done\n", time.Since(start).Seconds())
	for _, r := range rows {
		if len(r.Errors) > 0 {
			return 1
		}
	}
	return 0
}
