package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// params is one schedule's configuration, drawn from its seed.
type params struct {
	cfg        vocab.Config
	nodes      int
	names      []string
	storeRate  float64       // store seconds per true second
	maxLease   time.Duration // the store clamps grants to this (C2 when < LeaseDuration)
	maxDelay   time.Duration // the longest one-way message delay
	loss, dup  float64       // per message
	faultEnd   time.Duration // no fault starts or lasts past this true time
	end        time.Duration // the run ends here
	rejectProb float64       // an elected callback's dispatch fails (L6)
}

// world is one simulated run: the nodes, the store, the network, the
// fenced resources and the checker, on one event queue in true time.
type world struct {
	seed    uint64
	rng     *rand.Rand
	p       params
	now     time.Duration
	queue   eventQueue
	seq     uint64
	nodes   []*node
	store   *store
	res     map[string]*resource
	check   *checker
	cron    cronWorld
	trace   *strings.Builder // nil unless tracing
	events  int
	closing bool
}

// event is something due at a true time; run performs it.
type event struct {
	at  time.Duration
	seq uint64
	run func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// at schedules f at true time t (not before now).
func (w *world) at(t time.Duration, f func()) {
	w.seq++
	heap.Push(&w.queue, event{at: max(t, w.now), seq: w.seq, run: f})
}

func (w *world) after(d time.Duration, f func()) { w.at(w.now+d, f) }

// between returns a random duration in [lo, hi).
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *world) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

// delay draws one message's delay: mostly short, sometimes up to maxDelay.
func (w *world) delay() time.Duration {
	if w.chance(0.1) {
		return w.between(0, w.p.maxDelay)
	}
	return w.between(50*time.Microsecond, 2*time.Millisecond)
}

func (w *world) tracef(format string, args ...any) {
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%12v ", w.now)
		fmt.Fprintf(w.trace, format, args...)
		w.trace.WriteByte('\n')
	}
}

// broadcast sends the store's release notification of name to every node
// that watches it: each copy delayed, sometimes lost, sometimes twice.
func (w *world) broadcast(name string) {
	for _, n := range w.nodes {
		n.notify(name)
	}
}

// closeAll closes every node, once.
func (w *world) closeAll() {
	if w.closing {
		return
	}
	w.closing = true
	for _, n := range w.nodes {
		n.close()
	}
}

// run performs events until the end.
func (w *world) run() {
	for w.queue.Len() > 0 {
		e := heap.Pop(&w.queue).(event)
		if e.at > w.p.end {
			break
		}
		w.now = e.at
		w.events++
		e.run()
	}
	w.now = w.p.end
	w.check.finish()
}

// resource is a fenced resource (F1, F2): it accepts a write only if its
// token is not below the highest it accepted, checked and written in one
// step.
type resource struct {
	name    string
	highest engine.Token
}

// write arrives at the resource at the current true time with token.
func (w *world) write(r *resource, node int, token engine.Token) {
	if mutant == "read-then-write" {
		// F2 broken: the check reads the highest token now, and the write
		// lands a little later, whatever was accepted meanwhile.
		seen := r.highest
		w.after(w.between(0, 3*w.p.maxDelay), func() {
			if token >= seen {
				r.highest = token
				w.check.accepted(r.name, node, token)
			}
		})
		return
	}
	if token >= r.highest {
		r.highest = token
		w.check.accepted(r.name, node, token)
	} else {
		w.check.refused++
	}
}

// newWorld draws a schedule from seed; beyond makes the store's clock run
// faster than the configured Drift allows.
func newWorld(seed uint64, beyond bool) *world {
	w := &world{seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5151_5151)), res: map[string]*resource{}}
	w.p = drawParams(w.rng, beyond)
	w.store = newStore(w, w.p.storeRate, w.p.maxLease)
	w.check = newChecker(w)
	w.cron = drawCron(seed, w.p.cfg)
	for _, name := range w.p.names {
		w.res[name] = &resource{name: name}
	}
	if w.cron.on {
		w.res[cronName] = &resource{name: cronName}
	}
	for i := range w.p.nodes {
		w.nodes = append(w.nodes, newNode(w, i))
	}
	w.plan()
	return w
}

func drawParams(rng *rand.Rand, beyond bool) params {
	pick := func(xs ...time.Duration) time.Duration { return xs[rng.IntN(len(xs))] }
	var p params
	lease := pick(time.Second, 3*time.Second, 10*time.Second)
	drift := []float64{0, 0.01, 0.05, 0.2}[rng.IntN(4)]
	margin := pick(0, time.Millisecond, 10*time.Millisecond, 50*time.Millisecond)
	margin = min(margin, lease/20)
	renew := lease / 3
	if rng.IntN(3) == 0 {
		renew = lease / 10
	}
	for 2*renew > time.Duration(float64(lease)*(1-drift))-margin { // C1
		renew = renew * 9 / 10
	}
	p.cfg = vocab.Config{LeaseDuration: lease, RenewInterval: renew, Drift: drift, Margin: margin,
		RetryJitter: renew / 2, MinBackoff: min(100*time.Millisecond, renew/4)}
	p.nodes = 2 + rng.IntN(3)
	p.names = []string{"a", "b"}[:1+rng.IntN(2)]
	// Within drift, the store's clock runs at a rate in [1−Drift, 1+Drift]
	// of the nodes'; beyond it, faster than 1/(1−Drift) allows.
	switch {
	case beyond:
		p.storeRate = 1/(1-drift) + (0.02+0.2*rng.Float64())*(1+drift)
	case rng.IntN(3) == 0:
		p.storeRate = 1 + drift // at the bound
	default:
		p.storeRate = 1 + drift*(2*rng.Float64()-1)
	}
	p.maxLease = lease
	if rng.IntN(4) == 0 {
		p.maxLease = lease * time.Duration(4+rng.IntN(5)) / 10 // a shortened grant (C2)
	}
	p.maxDelay = time.Duration(float64(renew) * []float64{0.01, 0.1, 0.4}[rng.IntN(3)])
	p.loss = []float64{0, 0.01, 0.05}[rng.IntN(3)]
	p.dup = []float64{0, 0.02, 0.1}[rng.IntN(3)]
	p.rejectProb = []float64{0, 0.1}[rng.IntN(2)]
	p.faultEnd = 5 * lease
	p.end = p.faultEnd + liveBound(p) + 4*lease
	return p
}

// liveBound is how long after the faults end a name may go without a
// holder: the amnesia guard, a lease to expire the last holder's session,
// a step-down or rejected callback's cooldown (one lease), renewals and
// retries, and slow messages.
func liveBound(p params) time.Duration {
	return 4*p.cfg.LeaseDuration + 4*p.cfg.RenewInterval + 16*p.maxDelay
}

// plan draws the schedule's inputs and faults.
func (w *world) plan() {
	p := w.p
	// Every node starts something at once; more starts, stops, step-downs,
	// locks and abandons happen until the faults end.
	for _, n := range w.nodes {
		for _, name := range p.names {
			if w.chance(0.7) {
				n.startElection(name)
			}
		}
		n.startCron()
	}
	for t := w.between(0, p.cfg.RenewInterval); t < p.faultEnd; t += w.between(p.cfg.RenewInterval/4, 2*p.cfg.RenewInterval) {
		n := w.nodes[w.rng.IntN(len(w.nodes))]
		name := p.names[w.rng.IntN(len(p.names))]
		op := w.rng.IntN(10)
		w.at(t, func() { n.act(op, name) })
	}
	// Faults, each ending by faultEnd.
	kinds := 1 + w.rng.IntN(4)
	for range kinds {
		start := w.between(p.cfg.RenewInterval, p.faultEnd-p.cfg.LeaseDuration)
		d := w.between(p.cfg.RenewInterval/2, min(2*p.cfg.LeaseDuration, p.faultEnd-start))
		n := w.nodes[w.rng.IntN(len(w.nodes))]
		switch w.rng.IntN(5) {
		case 0: // a pause, often longer than the lease
			w.at(start, func() { w.check.fault("pause"); n.pause(d) })
		case 1: // the node cut off from the store
			w.at(start, func() { w.check.fault("partition"); n.cutUntil = w.now + d })
		case 2: // a durable store restart
			w.at(start, func() { w.check.fault("store-restart"); w.store.restart(min(d, p.cfg.LeaseDuration), false) })
		case 3: // an amnesiac store restart
			w.at(start, func() { w.check.fault("store-amnesia"); w.store.restart(min(d, p.cfg.RenewInterval), true) })
		case 4: // slow replies for a while
			w.at(start, func() { w.check.fault("slow"); n.slowUntil = w.now + d })
		}
	}
	// Spurious release notifications ("early" ones: nothing was released).
	for range w.rng.IntN(4) {
		name := p.names[w.rng.IntN(len(p.names))]
		w.at(w.between(0, p.faultEnd), func() { w.broadcast(name) })
	}
	// After the faults, every name has a contender again, for liveness.
	w.at(p.faultEnd, func() {
		for _, name := range p.names {
			w.nodes[0].ensure(name)
		}
		w.check.faultsEnded()
	})
	// Then every client closes, once every name had a holder (or the
	// liveness bound is over): each hands over what it holds (H1, S4).
	w.at(p.faultEnd+liveBound(p), w.closeAll)
	for _, n := range w.nodes {
		n.start()
	}
}

// sessionOf maps a node's session generation to the store's session id.
func (n *node) sessionOf(gen uint64) (backends.SessionID, bool) {
	id, ok := n.sessions[gen]
	return id, ok
}
