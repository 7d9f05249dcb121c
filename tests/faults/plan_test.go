package faults

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The kinds of fault a plan draws from.
const (
	faultStop      = "stop"      // SIGSTOP a node past the lease duration, then SIGCONT
	faultStopWrite = "stopwrite" // SIGSTOP a node past the lease while the fence holds its write in flight
	faultKill      = "kill"      // SIGKILL a node, then start it again (a new process)
	faultCut       = "cut"       // disable the node's proxy: its connections close, new ones are refused
	faultBlackhole = "blackhole" // the node's proxy drops every byte both ways, connections stay open
	faultLatency   = "latency"   // the node's proxy delays every byte both ways
	faultRestart   = "restart"   // kill the schedule's own server and start it again with its data
)

var faultKinds = []string{faultStop, faultStopWrite, faultKill, faultCut, faultBlackhole, faultLatency, faultRestart}

// fault is one step of a plan.
type fault struct {
	Kind   string
	Node   int           // the node it hits, if Holder is ""; -1 for restart
	Holder string        // if set: the node that holds this lease name when the fault starts (else Node)
	For    time.Duration // how long it lasts: the pause, the cut, the kill until the restart …
	Delay  time.Duration // latency: the delay of each byte
	Settle time.Duration // the quiet time after it ends, before the next fault
}

func (f fault) String() string {
	target := fmt.Sprintf("node %d", f.Node)
	if f.Holder != "" {
		target = "the holder of " + f.Holder + " (else node " + fmt.Sprint(f.Node) + ")"
	}
	switch f.Kind {
	case faultRestart:
		return fmt.Sprintf("restart the server, settle %v", f.Settle)
	case faultLatency:
		return fmt.Sprintf("latency %v on %s for %v, settle %v", f.Delay, target, f.For, f.Settle)
	}
	return fmt.Sprintf("%s %s for %v, settle %v", f.Kind, target, f.For, f.Settle)
}

// plan is a schedule's faults, a function of its seed and the run's shape
// alone, so that -faults.seed replays it.
type plan struct {
	Seed   int64
	Names  []string
	Faults []fault
}

func (p plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, names %v:", p.Seed, p.Names)
	for i, f := range p.Faults {
		fmt.Fprintf(&b, "\n  %d. %v", i+1, f)
	}
	return b.String()
}

// newPlan draws a plan of n faults on nodes nodes for a lease of lease,
// from seed. A schedule restarts its server at most once.
func newPlan(seed int64, n, nodes int, lease time.Duration) plan {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	p := plan{Seed: seed, Names: []string{fmt.Sprintf("s%d.a", seed), fmt.Sprintf("s%d.b", seed)}}
	between := func(lo, hi float64) time.Duration { // lo to hi leases
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(lease)).Round(time.Millisecond)
	}
	restarted := false
	for range n {
		f := fault{Kind: faultKinds[rng.IntN(len(faultKinds))], Node: rng.IntN(nodes)}
		if f.Kind == faultRestart && restarted {
			f.Kind = faultKinds[rng.IntN(len(faultKinds)-1)]
		}
		if rng.IntN(4) != 0 {
			f.Holder = p.Names[rng.IntN(len(p.Names))]
		}
		switch f.Kind {
		case faultStop, faultStopWrite:
			f.For = between(1.1, 2) // past the lease: the others take over
		case faultKill:
			f.For = between(0, 0.5)
		case faultCut, faultBlackhole:
			f.For = between(0.2, 1.5)
		case faultLatency:
			f.For = between(0.5, 1.5)
			f.Delay = between(0.02, 0.3)
		case faultRestart:
			restarted = true
			f.Node, f.Holder = -1, ""
		}
		f.Settle = between(0.7, 1.2)
		p.Faults = append(p.Faults, f)
	}
	return p
}
