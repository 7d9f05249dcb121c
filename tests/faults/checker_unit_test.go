package faults

import (
	"os"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// The checker on made-up logs: it finds an overlap, tokens out of order, a
// stale write the fence accepted and a write with no term; and it passes a
// clean hand-over.
func TestCheckerFindsViolations(t *testing.T) {
	p := plan{Seed: 1, Names: []string{"a"}}
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	clean := []event{
		{Ev: "begin", Node: "n0.0", Name: "a", Token: 1, Mono: ms(0), Until: ms(1000)},
		{Ev: "valid", Node: "n0.0", Name: "a", Token: 1, Mono: ms(500), Until: ms(1500)},
		{Ev: "end", Node: "n0.0", Name: "a", Token: 1, Mono: ms(600)},
		{Ev: "begin", Node: "n1.0", Name: "a", Token: 2, Mono: ms(700), Until: ms(1700)},
	}
	fe := &fence{accepted: map[string][]fencedWrite{"a": {{Name: "a", Token: 1, Mono: ms(100)}, {Name: "a", Token: 2, Mono: ms(800)}}}, refused: map[string]int{}}
	if r := check(p, clean, fe, nil, ms(2000)); len(r.violations) != 0 {
		t.Fatalf("a clean hand-over: %v", r.violations)
	}
	overlap := append(clean[:2:2], event{Ev: "begin", Node: "n1.0", Name: "a", Token: 2, Mono: ms(1200), Until: ms(2000)})
	if r := check(p, overlap, fe, nil, ms(2000)); r.overlaps != 1 {
		t.Errorf("an overlap (a term begun while another was valid): %+v", r)
	}
	order := append(clean[:3:3], event{Ev: "begin", Node: "n1.0", Name: "a", Token: 1, Mono: ms(700), Until: ms(1700)})
	if r := check(p, order, fe, nil, ms(2000)); !strings.Contains(strings.Join(r.violations, "\n"), "token order") {
		t.Errorf("a token not above the previous term's: %v", r.violations)
	}
	fe.accepted["a"] = append(fe.accepted["a"], fencedWrite{Name: "a", Token: 1, Mono: ms(900)}, fencedWrite{Name: "a", Token: 7, Mono: ms(950)})
	r := check(p, clean, fe, nil, ms(2000))
	if r.stale != 1 || !strings.Contains(strings.Join(r.violations, "\n"), "no term had that token") {
		t.Errorf("a stale write accepted, and a write of no term: %+v", r)
	}
}

// The checker on real nodes that log a lease more validity than their terms
// have: pausing the holder past its lease makes another node take over while
// the paused one claimed to be valid, and the checker must see the overlap.
func TestCheckerCatchesOverclaim(t *testing.T) {
	lease := *flagLease
	srv := kinds[0].start(t, lease) // Redis
	prime(t, srv, lease)
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := plan{Seed: 7, Names: []string{"mutant.a"}, Faults: []fault{{Kind: faultStop, Holder: "mutant.a", For: 2 * lease, Settle: lease}}}
	r := runSchedule(t, api, srv, startFence(t), p, 2, lease, nodeMutantEnv+"=overclaim")
	os.RemoveAll(r.kept) // the logs a failure keeps: this one is expected
	if r.overlaps == 0 {
		t.Fatalf("no overlap found with nodes that overclaim their terms by a lease: %+v", r)
	}
	t.Logf("found %d overlaps, as it should: %s", r.overlaps, r.violations[0])
}

// A race report is go-zookeeper's when the innermost frame outside the
// standard library of both accesses is in go-zookeeper, whoever created the
// goroutines; it is ours when either access is in this module's code.
func TestRaceClassifier(t *testing.T) {
	zkOnly := `WARNING: DATA RACE
Write at 0x00c00004fbc0 by goroutine 81:
  reflect.Value.SetString()
      /usr/local/go/src/reflect/value.go:2318 +0x87
  github.com/go-zookeeper/zk.decodePacketValue()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/structs.go:473 +0x369

Previous read at 0x00c00004fbc0 by goroutine 82:
  github.com/go-zookeeper/zk.(*Conn).CreateContainer()
      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/conn.go:1099 +0x27b
  github.com/simba-go/simba/backends/zookeeper.(*Backend).OpenSession.func5()
      /work/backends/zookeeper/session.go:155 +0x1b2

Goroutine 82 (finished) created at:
  github.com/simba-go/simba/backends/zookeeper.(*session).do()
      /work/backends/zookeeper/session.go:325 +0x3bc
`
	if accessesInModule(zkOnly) {
		t.Errorf("a race between go-zookeeper's own accesses counted as ours")
	}
	ours := strings.Replace(zkOnly, "  github.com/go-zookeeper/zk.(*Conn).CreateContainer()\n      /root/go/pkg/mod/github.com/go-zookeeper/zk@v1.0.4/conn.go:1099 +0x27b\n", "", 1)
	if !accessesInModule(ours) {
		t.Errorf("a race with an access in this module's code counted as go-zookeeper's")
	}
}

// A term its process never saw valid (its task began after its deadline,
// and logged only its end) is left out: its late end says nothing about
// the order of the tokens.
func TestCheckerSkipsTermsNeverValid(t *testing.T) {
	p := plan{Seed: 1, Names: []string{"a"}}
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	events := []event{
		{Ev: "begin", Node: "n0.0", Name: "a", Token: 5, Mono: ms(0), Until: ms(1000)},
		{Ev: "end", Node: "n0.0", Name: "a", Token: 5, Mono: ms(900)},
		{Ev: "begin", Node: "n1.0", Name: "a", Token: 6, Mono: ms(1000), Until: ms(2000)},
		{Ev: "end", Node: "n2.0", Name: "a", Token: 4, Mono: ms(3000)},
	}
	fe := &fence{accepted: map[string][]fencedWrite{}, refused: map[string]int{}}
	if r := check(p, events, fe, nil, ms(3000)); len(r.violations) != 0 || r.terms != 2 {
		t.Fatalf("%d terms, violations %v; want 2 terms and none", r.terms, r.violations)
	}
}
