package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Options sizes a run. The zero value of a field takes the full run's
// default (see [FullOptions]); [QuickOptions] is the smoke test's.
type Options struct {
	HandOffs  int   // graceful hand-offs per row (the table's p99 needs ≥ 200)
	FailOvers int   // crash fail-overs per row
	Pairs     int   // acquire+release pairs per round, after Warmup
	Warmup    int   // pairs run before each round's timed ones
	Rounds    int   // acquire+release rounds, every row in turn in each
	Window    int   // renewal periods counted for requests per renewal
	Sizes     []int // leases held for requests per renewal

	// Only, if set, keeps the rows whose Name or Store it matches.
	Only *regexp.Regexp

	// Progress, if set, receives a line per step.
	Progress func(format string, args ...any)
}

// FullOptions are the sizes of the table in bench/README.md.
func FullOptions() Options {
	return Options{HandOffs: 200, FailOvers: 5, Pairs: 1000, Warmup: 200, Rounds: 3, Window: 12,
		Sizes: []int{1, 100, 1000}}
}

// QuickOptions run every measurement once or twice, for the smoke test: the
// figures mean nothing, but every path of every row runs.
func QuickOptions() Options {
	return Options{HandOffs: 2, FailOvers: 1, Pairs: 5, Warmup: 2, Rounds: 1, Window: 2, Sizes: []int{1, 3}}
}

func (o Options) withDefaults() Options {
	d := FullOptions()
	if o.HandOffs <= 0 {
		o.HandOffs = d.HandOffs
	}
	if o.FailOvers <= 0 {
		o.FailOvers = d.FailOvers
	}
	if o.Pairs <= 0 {
		o.Pairs = d.Pairs
	}
	if o.Warmup <= 0 {
		o.Warmup = d.Warmup
	}
	if o.Rounds <= 0 {
		o.Rounds = d.Rounds
	}
	if o.Window <= 0 {
		o.Window = d.Window
	}
	if len(o.Sizes) == 0 {
		o.Sizes = d.Sizes
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	return o
}

// Timing of the measurements.
const (
	// settle is how long a waiter is given to block (its first attempt
	// refused, its watch set and in step) before the holder releases or
	// crashes: longer than etcd's 100 ms loop that brings a watch started
	// at an older revision up to date (until then a deletion reaches the
	// waiter only at that loop's next turn).
	settle = 150 * time.Millisecond

	// releaseJitter spreads the release over a polling waiter's retry
	// period (redislock's 100 ms; redsync draws 50–250 ms per retry), so
	// that its hand-off is not always measured at the same phase.
	releaseJitter = 100 * time.Millisecond

	// idleRawEvery: a raw pair after idling is timed before every
	// idleRawEvery-th hand-off.
	idleRawEvery = 4

	// handOffWithin bounds one hand-off.
	handOffWithin = 10 * time.Second

	// callWithin bounds an uncontended acquire or a release.
	callWithin = 10 * time.Second

	// closeWithin bounds a node's Close.
	closeWithin = 5 * time.Second
)

// Row is one implementation's figures. A measurement that failed leaves its
// fields empty and says why in Errors.
type Row struct {
	Impl    Impl
	Skipped string // why the row did not run at all, or ""

	HandOff []time.Duration // release call → waiter's acquire returned
	// IdleRaw is the store's raw pair (see Raw) timed after the same idle
	// span as a hand-off's release: the floor of two writes on a machine
	// whose round trips slow down after idling (a hand-off is a release and
	// an acquire, each at least one write).
	IdleRaw []time.Duration

	FailOver []float64 // holder's last renewal → waiter's acquire returned, ÷ Lease

	Period     time.Duration // the renewal period requests are counted per
	PerRenewal map[int]float64
	// RenewalCommands (RESP) are the requests per renewal period by
	// command, with the first size of leases held.
	RenewalCommands map[string]float64

	AcqRel       []time.Duration // all rounds
	AcqRelRounds []time.Duration // each round's median
	Raw          []time.Duration
	RawRounds    []time.Duration
	RawWhat      string // what the raw round trips are

	// Redis rows: the server's CPU and command time per pair, over every
	// round; RawCPU for the raw pair. Commands is per command: calls and µs
	// per pair (a script's inner commands under their own names).
	CPU, RawCPU time.Duration
	Commands    map[string]commandRate

	Errors []string
}

// commandRate is a command's calls and Redis time per acquire+release pair.
type commandRate struct {
	Calls float64
	Usec  float64
}

func (r *Row) fail(stage string, err error) {
	r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", stage, err))
}

// redisTarget is implemented by targets on Redis: the harness reads the
// server's INFO counters around their acquire+release pairs.
type redisTarget interface {
	redisAddr() string
}

// Run measures every implementation of impls and returns a row each, in
// order. Acquire+release runs first, in Rounds rounds that take every row in
// turn, so that each row sees the machine in every state it goes through;
// then, row after row, hand-off, crash fail-over and requests per renewal.
func Run(ctx context.Context, env *Env, impls []Impl, o Options) []Row {
	o = o.withDefaults()
	rows := make([]Row, 0, len(impls))
	targets := make([]Target, 0, len(impls))
	for _, im := range impls {
		if o.Only != nil && !o.Only.MatchString(im.Name) && !o.Only.MatchString(im.Store) {
			continue
		}
		row := Row{Impl: im}
		o.Progress("%s: connecting", im.Name)
		t, err := im.Open(ctx, env)
		if err != nil {
			row.Skipped = err.Error()
			o.Progress("%s: skipped: %v", im.Name, err)
		}
		rows = append(rows, row)
		targets = append(targets, t)
	}
	defer func() {
		for _, t := range targets {
			if t != nil {
				t.Close()
			}
		}
	}()
	for round := range o.Rounds {
		for i := range rows {
			if targets[i] == nil || ctx.Err() != nil {
				continue
			}
			o.Progress("%s: acquire+release, round %d of %d", rows[i].Impl.Name, round+1, o.Rounds)
			if err := acquireRelease(ctx, targets[i], &rows[i], o); err != nil {
				rows[i].fail(fmt.Sprintf("acquire+release, round %d", round+1), err)
			}
		}
	}
	for i := range rows {
		t := targets[i]
		if t == nil || ctx.Err() != nil {
			continue
		}
		r := &rows[i]
		o.Progress("%s: %d hand-offs", r.Impl.Name, o.HandOffs)
		if err := handOff(ctx, t, r, o); err != nil {
			r.fail("hand-off", err)
		}
		o.Progress("%s: %d crash fail-overs", r.Impl.Name, o.FailOvers)
		if err := failOver(ctx, t, r, o); err != nil {
			r.fail("fail-over", err)
		}
		for _, n := range o.Sizes {
			o.Progress("%s: requests per renewal, %d leases", r.Impl.Name, n)
			if err := requestsPerRenewal(ctx, t, r, n, o); err != nil {
				r.fail(fmt.Sprintf("requests per renewal, %d leases", n), err)
			}
		}
	}
	return rows
}

// pair is one uncontended acquire and release of name.
func pair(ctx context.Context, n Node, name string) error {
	actx, cancel := context.WithTimeout(ctx, callWithin)
	defer cancel()
	h, err := n.Acquire(actx, name)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := h.Release(actx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// acquireRelease is one round of uncontended acquire+release pairs on a new
// node, each followed by the raw pair, so that both see the same moment of
// the machine; on Redis, then, the server's counters around Pairs more
// pairs of each.
func acquireRelease(ctx context.Context, t Target, r *Row, o Options) error {
	node, err := t.NewNode(ctx, newNodeNet(t.Framing()))
	if err != nil {
		return err
	}
	defer closeNode(node)
	raw, closeRaw, err := t.Raw(ctx)
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	defer closeRaw()
	rawPair := func() error {
		rctx, cancel := context.WithTimeout(ctx, callWithin)
		defer cancel()
		if err := raw(rctx); err != nil {
			return fmt.Errorf("raw: %w", err)
		}
		return nil
	}
	const name = "acqrel"
	for range o.Warmup {
		if err := pair(ctx, node, name); err != nil {
			return err
		}
		if err := rawPair(); err != nil {
			return err
		}
	}
	ours := make([]time.Duration, 0, o.Pairs)
	base := make([]time.Duration, 0, o.Pairs)
	for range o.Pairs {
		t0 := time.Now()
		if err := pair(ctx, node, name); err != nil {
			return err
		}
		t1 := time.Now()
		if err := rawPair(); err != nil {
			return err
		}
		t2 := time.Now()
		ours = append(ours, t1.Sub(t0))
		base = append(base, t2.Sub(t1))
	}
	r.AcqRel = append(r.AcqRel, ours...)
	r.Raw = append(r.Raw, base...)
	r.AcqRelRounds = append(r.AcqRelRounds, quantile(ours, 0.5))
	r.RawRounds = append(r.RawRounds, quantile(base, 0.5))

	rt, ok := t.(redisTarget)
	if !ok {
		return nil
	}
	admin := redisClient(rt.redisAddr(), nil)
	defer admin.Close()
	serverSide := func(f func() error) (redisStats, error) {
		before, err := readRedisStats(ctx, admin)
		if err != nil {
			return redisStats{}, err
		}
		for range o.Pairs {
			if err := f(); err != nil {
				return redisStats{}, err
			}
		}
		after, err := readRedisStats(ctx, admin)
		if err != nil {
			return redisStats{}, err
		}
		return after.sub(before), nil
	}
	d, err := serverSide(func() error { return pair(ctx, node, name) })
	if err != nil {
		return err
	}
	dr, err := serverSide(rawPair)
	if err != nil {
		return err
	}
	// Pool the rounds: each adds Pairs pairs.
	prev := float64(len(r.AcqRelRounds) - 1)
	all := prev + 1
	per := func(total time.Duration) time.Duration { return total / time.Duration(o.Pairs) }
	r.CPU = time.Duration((float64(r.CPU)*prev + float64(per(d.cpu))) / all)
	r.RawCPU = time.Duration((float64(r.RawCPU)*prev + float64(per(dr.cpu))) / all)
	if r.Commands == nil {
		r.Commands = map[string]commandRate{}
	}
	for name := range mergeKeys(r.Commands, d.commands) {
		c := d.commands[name]
		old := r.Commands[name]
		r.Commands[name] = commandRate{
			Calls: (old.Calls*prev + float64(c.calls)/float64(o.Pairs)) / all,
			Usec:  (old.Usec*prev + float64(c.usec)/float64(o.Pairs)) / all,
		}
	}
	return nil
}

func mergeKeys[A, B any](a map[string]A, b map[string]B) map[string]struct{} {
	k := make(map[string]struct{}, len(a)+len(b))
	for n := range a {
		k[n] = struct{}{}
	}
	for n := range b {
		k[n] = struct{}{}
	}
	return k
}

// acquired is what a waiter's Acquire returned, and when.
type acquired struct {
	held Held
	at   time.Time
	err  error
}

// wait starts n's Acquire of name on a goroutine of its own.
func wait(ctx context.Context, n Node, name string, within time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		h, err := n.Acquire(actx, name)
		ch <- acquired{h, time.Now(), err}
	}()
	return ch
}

// handOff measures graceful hand-offs between two nodes: the waiter blocked
// in its acquire, the holder releases; from the release call to the
// waiter's acquire returning. The two swap roles after each.
func handOff(ctx context.Context, t Target, r *Row, o Options) error {
	var nodes [2]Node
	for i := range nodes {
		n, err := t.NewNode(ctx, newNodeNet(t.Framing()))
		if err != nil {
			return err
		}
		defer closeNode(n)
		nodes[i] = n
	}
	const name = "handoff"
	actx, cancel := context.WithTimeout(ctx, callWithin)
	held, err := nodes[0].Acquire(actx, name)
	cancel()
	if err != nil {
		return fmt.Errorf("first acquire: %w", err)
	}
	holder := 0
	defer func() { release(held) }()
	raw, closeRaw, err := t.Raw(ctx)
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	defer closeRaw()
	for i := range o.HandOffs {
		if i%idleRawEvery == 0 {
			time.Sleep(settle + rand.N(releaseJitter))
			t0 := time.Now()
			rctx, cancel := context.WithTimeout(ctx, callWithin)
			err := raw(rctx)
			cancel()
			if err != nil {
				return fmt.Errorf("raw pair after idling: %w", err)
			}
			r.IdleRaw = append(r.IdleRaw, time.Since(t0))
		}
		waiter := 1 - holder
		ch := wait(ctx, nodes[waiter], name, handOffWithin)
		time.Sleep(settle + rand.N(releaseJitter))
		t0 := time.Now()
		rctx, cancel := context.WithTimeout(ctx, callWithin)
		err := held.Release(rctx)
		cancel()
		if err != nil {
			held = nil
			<-ch
			return fmt.Errorf("hand-off %d: release: %w", i, err)
		}
		a := <-ch
		if a.err != nil {
			held = nil
			return fmt.Errorf("hand-off %d: the waiter's acquire: %w", i, a.err)
		}
		r.HandOff = append(r.HandOff, a.at.Sub(t0))
		held, holder = a.held, waiter
	}
	return nil
}

// failOver measures crash fail-overs: a holder on a path of its own is
// blackholed (it stops renewing, releases nothing, its connections stay
// open and silent), with a waiter blocked in its acquire; from the holder's
// last successful renewal to the waiter's acquire returning, ÷ Lease. Each
// holder is a new node, renewing for one to two periods before the crash,
// so that the crash falls at a random point of its renewal period.
func failOver(ctx context.Context, t Target, r *Row, o Options) error {
	waiter, err := t.NewNode(ctx, newNodeNet(t.Framing()))
	if err != nil {
		return err
	}
	defer closeNode(waiter)
	var crashed sync.WaitGroup
	defer crashed.Wait()
	const name = "failover"
	for i := range o.FailOvers {
		net := newNodeNet(t.Framing())
		holder, err := t.NewNode(ctx, net)
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, callWithin)
		_, err = holder.Acquire(actx, name) // held until the crash, never released
		cancel()
		if err != nil {
			closeNode(holder)
			return fmt.Errorf("fail-over %d: the holder's acquire: %w", i, err)
		}
		period := holder.RenewalPeriod()
		if period <= 0 {
			period = Lease / 3
		}
		time.Sleep(period + rand.N(period))
		ch := wait(ctx, waiter, name, 10*Lease)
		time.Sleep(settle)
		net.Crash()
		a := <-ch
		last := holder.LastRenewal()
		net.Cut()
		crashed.Go(func() { closeNode(holder) })
		if a.err != nil {
			return fmt.Errorf("fail-over %d: the waiter's acquire: %w", i, a.err)
		}
		release(a.held)
		if last.IsZero() {
			return fmt.Errorf("fail-over %d: the holder reports no renewal", i)
		}
		r.FailOver = append(r.FailOver, float64(a.at.Sub(last))/float64(Lease))
	}
	return nil
}

// requestsPerRenewal counts the requests one idle node sends while it holds
// n leases, over Window renewal periods. The window starts half a period
// after a renewal and lasts a whole number of periods, so that a strictly
// periodic renewal is counted exactly Window times, not Window ± 1. Where
// the library picks its own period (etcd), the count is per keep-alive the
// node sent in the window.
func requestsPerRenewal(ctx context.Context, t Target, r *Row, n int, o Options) error {
	net := newNodeNet(t.Framing())
	node, err := t.NewNode(ctx, net)
	if err != nil {
		return err
	}
	defer closeNode(node)
	helds := make([]Held, 0, n)
	defer func() {
		for _, h := range helds {
			release(h)
		}
	}()
	for i := range n {
		actx, cancel := context.WithTimeout(ctx, callWithin)
		h, err := node.Acquire(actx, fmt.Sprintf("held-%d-%d", n, i))
		cancel()
		if err != nil {
			return fmt.Errorf("acquire %d of %d: %w", i+1, n, err)
		}
		helds = append(helds, h)
	}
	period := node.RenewalPeriod()
	rc, counted := node.(renewalCounter)
	if period <= 0 && !counted {
		return errors.New("the node neither has a fixed renewal period nor counts its renewals")
	}
	nominal := period
	if nominal <= 0 {
		nominal = Lease / 3
	}
	// Settle (the last acquire's follow-ups), then align on a renewal.
	time.Sleep(nominal)
	if err := awaitRenewal(ctx, node, 3*nominal); err != nil {
		return err
	}
	time.Sleep(nominal / 2)
	var ren0 int64
	if counted {
		ren0 = rc.Renewals()
	}
	req0, cmd0, t0 := net.Requests(), net.Commands(), time.Now()
	time.Sleep(time.Duration(o.Window) * nominal)
	req1, cmd1, t1 := net.Requests(), net.Commands(), time.Now()
	if n == o.Sizes[0] && cmd1 != nil {
		r.RenewalCommands = map[string]float64{}
		for name, c := range cmd1 {
			if d := c - cmd0[name]; d > 0 {
				r.RenewalCommands[name] = float64(d) / float64(o.Window)
			}
		}
	}
	if period <= 0 {
		ren := rc.Renewals() - ren0
		if ren <= 0 {
			return fmt.Errorf("no renewal in %v", t1.Sub(t0))
		}
		period = t1.Sub(t0) / time.Duration(ren)
		if r.PerRenewal == nil {
			r.PerRenewal = map[int]float64{}
		}
		r.PerRenewal[n] = float64(req1-req0) / float64(ren)
	} else {
		if r.PerRenewal == nil {
			r.PerRenewal = map[int]float64{}
		}
		r.PerRenewal[n] = float64(req1-req0) / float64(o.Window)
	}
	if n == o.Sizes[0] || r.Period == 0 {
		r.Period = period
	}
	return nil
}

// awaitRenewal waits until node renews (its LastRenewal moves), at most
// within.
func awaitRenewal(ctx context.Context, node Node, within time.Duration) error {
	last := node.LastRenewal()
	deadline := time.Now().Add(within)
	for node.LastRenewal().Equal(last) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no renewal within %v", within)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// release releases h, if any, bounded by callWithin.
func release(h Held) {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWithin)
	defer cancel()
	_ = h.Release(ctx)
}

// closeNode closes n, bounded by closeWithin.
func closeNode(n Node) {
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	_ = n.Close(ctx)
}

// quantile returns the q-quantile of d (nearest rank), or 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
