package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// checker watches every core's effects on the simulator's true time and
// records what breaks the contract.
type checker struct {
	w          *world
	violations []string
	terms      map[termKey]*termLog
	order      []*termLog               // in adoption order
	deadlines  map[genKey]time.Duration // each session's local deadline, in true time
	kaSent     map[genKey]time.Duration // the last keep-alive (or open) sent per session
	gone       map[contenderKey]bool    // contenders stopped or forgotten: no term may start for them (L3)
	writes     []termcheck.Write        // the writes the resources accepted, in order
	accepts    int
	refused    int
	faults     map[string]int
	faultsEnd  time.Duration
	gap        time.Duration // the longest time without a holder after the faults ended, over the names
	firstAfter map[string]time.Duration
	sessions   map[backends.SessionID]genKey // each store session, as the node that opened it knows it
}

type termKey struct {
	node, life int
	id         engine.TermID
}

type genKey struct {
	node, life int
	gen        uint64
}

type contenderKey struct {
	node, life int
	id         engine.ContenderID
}

// termLog is one term's history in true time.
type termLog struct {
	key            termKey
	name           string
	token          engine.Token
	gen            uint64
	start          time.Duration
	end            time.Duration // when its validity ended, if lapsed or ended
	over           bool          // validity is over
	revoked        bool          // ended before its deadline
	elected        bool          // the elected callback was dispatched
	rejected       bool          // ... and could not run (L6)
	rejectKnown    bool          // ... and the core was told (DispatchFailed)
	revokedCalls   int
	crashedOrEnded bool
}

func newChecker(w *world) *checker {
	return &checker{w: w, terms: map[termKey]*termLog{}, deadlines: map[genKey]time.Duration{},
		kaSent: map[genKey]time.Duration{}, gone: map[contenderKey]bool{},
		faults: map[string]int{}, firstAfter: map[string]time.Duration{}, sessions: map[backends.SessionID]genKey{}}
}

func (c *checker) violate(rule, format string, args ...any) {
	msg := fmt.Sprintf("%s at %v: %s", rule, c.w.now, fmt.Sprintf(format, args...))
	c.violations = append(c.violations, msg)
	c.w.tracef("VIOLATION %s", msg)
}

func (c *checker) fault(kind string) {
	c.faults[kind]++
	c.w.tracef("fault %s", kind)
}

func (c *checker) sessionOpened(n *node, gen uint64, id backends.SessionID) {
	c.sessions[id] = genKey{n.i, n.life, gen}
}

// expired checks D3 and D1 when the store expires session id at true time
// at (or, after a restart that lost it, when its guard lets the store grant
// its leases again): every term of the session ended before, by at least
// half the Margin — the slack D1's formula keeps beyond what Drift needs.
func (c *checker) expired(id backends.SessionID, at time.Duration) {
	k, ok := c.sessions[id]
	if !ok {
		return
	}
	slack := c.w.p.cfg.Margin / 2
	for _, t := range c.order {
		if t.key.node != k.node || t.key.life != k.life || t.gen != k.gen {
			continue
		}
		end := t.end
		if !t.over {
			end = c.deadlines[k]
		}
		switch {
		case end > at:
			c.violate("D3", "%s#%d (n%d) valid until %v, after its session expired in the store at %v", t.name, t.token, k.node, end, at)
		case end > at-slack:
			c.violate("D1", "%s#%d (n%d) valid until %v, within half the Margin (%v) of its session's expiry at %v",
				t.name, t.token, k.node, end, c.w.p.cfg.Margin, at)
		}
	}
}

// effect follows one effect of node n's core.
func (c *checker) effect(n *node, e engine.Effect) {
	now := c.w.now
	switch e.Kind {
	case engine.EffSetDeadline:
		k := genKey{n.i, n.life, e.Gen}
		at := n.birth + e.At
		if old, ok := c.deadlines[k]; ok && now >= old && at > now {
			for _, t := range c.order {
				if t.key.node == n.i && t.key.life == n.life && t.gen == e.Gen && !t.over {
					c.violate("T3", "%s#%d of n%d valid again after its deadline %v passed (new deadline %v)",
						t.name, t.token, n.i, old, at)
				}
			}
		}
		c.settle(n, e.Gen)
		c.deadlines[k] = at
	case engine.EffTermStarted:
		if c.gone[contenderKey{n.i, n.life, e.Contender}] {
			c.violate("L3", "n%d started a term %s#%d for a contender already stopped", n.i, e.Name, e.Token)
		}
		t := &termLog{key: termKey{n.i, n.life, e.Term}, name: e.Name, token: e.Token, gen: e.Gen, start: now}
		if dl, ok := c.deadlines[genKey{n.i, n.life, e.Gen}]; !ok || dl <= now {
			c.violate("D4", "n%d started %s#%d after its session's deadline", n.i, e.Name, e.Token)
		}
		c.terms[t.key] = t
		c.order = append(c.order, t)
		// Liveness is measured on the scenario's names only: the cron
		// schedule's lease is not one (allHeld counts them).
		if c.faultsEnd > 0 && slices.Contains(c.w.p.names, e.Name) {
			if _, seen := c.firstAfter[e.Name]; !seen {
				c.firstAfter[e.Name] = now
				c.allHeld()
			}
		}
	case engine.EffTermEnded:
		if t := c.terms[termKey{n.i, n.life, e.Term}]; t != nil {
			c.settle(n, t.gen)
			if !t.over {
				t.over, t.end, t.revoked = true, now, true
			}
		}
	case engine.EffDispatch:
		t := c.terms[termKey{n.i, n.life, e.Term}]
		if t == nil {
			c.violate("L1", "n%d dispatched a callback for an unknown term t%d", n.i, e.Term)
			return
		}
		if e.Elected {
			t.elected = true
			return
		}
		switch {
		case t.rejectKnown:
			c.violate("L6", "n%d: a revoked callback for %s#%d after the core learned that its elected callback could not be dispatched", n.i, t.name, t.token)
		case t.rejected:
			// The core dispatched it before it learned of the rejection;
			// the driver skips a revoked callback whose elected one it
			// could not dispatch (the runtime's does), so it never runs.
			return
		}
		t.revokedCalls++ // one without an elected one, or a second: termcheck's pairing (L1)
	case engine.EffSend:
		switch e.Req.Kind {
		case engine.ReqOpen:
			c.kaSent[genKey{n.i, n.life, e.Req.Gen}] = now
		case engine.ReqKeepAlive:
			c.renewalGap(n, e.Req.Gen, "sent the next")
			c.kaSent[genKey{n.i, n.life, e.Req.Gen}] = now
		}
	case engine.EffEvent:
		if e.Event.Kind == vocab.EventSessionEnded && e.Event.Reason == vocab.ReasonDeadlinePassed {
			c.renewalGap(n, n.genOf(e.Event.Session), "lost the session")
		}
	case engine.EffForget:
		if e.Contender != 0 {
			c.gone[contenderKey{n.i, n.life, e.Contender}] = true
		}
	}
}

// genOf returns the generation of the node's session id.
func (n *node) genOf(id any) uint64 {
	for gen, sid := range n.sessions {
		if sid == id {
			return gen
		}
	}
	return 0
}

// renewalGap checks C3: a live session is renewed at least every
// RenewInterval, and a failed renewal retried within RenewInterval; with
// calls bounded by the renewal period (D2), no two keep-alives of a
// session are more than two renewal intervals apart, nor the last one and
// the deadline that ends it. A pause excuses the gap.
func (c *checker) renewalGap(n *node, gen uint64, what string) {
	prev, ok := c.kaSent[genKey{n.i, n.life, gen}]
	if !ok || n.resumedAt > prev {
		return
	}
	if gap := c.w.now - prev; gap > 2*c.w.p.cfg.RenewInterval+time.Millisecond {
		c.violate("C3", "n%d %s keep-alive %v after the previous one (RenewInterval %v)", n.i, what, gap, c.w.p.cfg.RenewInterval)
	}
}

// settle ends the validity of the terms of a session whose deadline passed.
func (c *checker) settle(n *node, gen uint64) {
	dl, ok := c.deadlines[genKey{n.i, n.life, gen}]
	if !ok || c.w.now < dl {
		return
	}
	for _, t := range c.order {
		if t.key.node == n.i && t.key.life == n.life && t.gen == gen && !t.over {
			t.over, t.end = true, dl
		}
	}
}

// validNow reports whether a term is valid at this instant, as its Term
// would read (T3).
func (c *checker) validNow(node, life int, id engine.TermID) bool {
	t := c.terms[termKey{node, life, id}]
	if t == nil || t.over {
		return false
	}
	return c.w.now < c.deadlines[genKey{node, life, t.gen}]
}

// accepted records a write the resource accepted (F1, F2), which finish
// checks: tokens never go down, and each is a term's.
func (c *checker) accepted(name string, node int, token engine.Token) {
	c.accepts++
	c.writes = append(c.writes, termcheck.Write{Name: name, Node: fmt.Sprintf("n%d", node), Token: int64(token), At: c.w.now, Accepted: true})
}

func (c *checker) paused(node int) {}

// rejected notes that the driver could not dispatch t's elected callback.
func (c *checker) rejected(n *node, id engine.TermID) {
	if t := c.terms[termKey{n.i, n.life, id}]; t != nil {
		t.rejected = true
	}
}

// rejectDelivered notes that the core was told (DispatchFailed) that t's
// elected callback could not be dispatched: from now on it must not
// dispatch t's revoked callback.
func (c *checker) rejectDelivered(n *node, id engine.TermID) {
	if t := c.terms[termKey{n.i, n.life, id}]; t != nil {
		t.rejectKnown = true
	}
}

// crashed ends the validity of the node's terms: the process is gone.
func (c *checker) crashed(node int) {
	for _, t := range c.order {
		if t.key.node == node && !t.over {
			dl := c.deadlines[genKey{t.key.node, t.key.life, t.gen}]
			t.over, t.end, t.crashedOrEnded = true, min(c.w.now, dl), true
		}
	}
}

// faultsEnded starts the liveness measure: the time from now until each
// name has a valid term.
func (c *checker) faultsEnded() {
	c.faultsEnd = c.w.now
	for _, name := range c.w.p.names {
		for _, t := range c.order {
			if t.name == name && c.validNow(t.key.node, t.key.life, t.key.id) {
				c.firstAfter[name] = c.w.now
			}
		}
	}
	c.allHeld()
}

// allHeld closes the clients a little after every name had a holder once
// the faults ended: the rest of the run would only renew.
func (c *checker) allHeld() {
	if len(c.firstAfter) == len(c.w.p.names) {
		c.w.after(c.w.p.cfg.LeaseDuration, c.w.closeAll)
	}
}

// finish closes the books: every interval ends, then the checks that need
// the whole history run.
func (c *checker) finish() {
	for _, t := range c.order {
		if !t.over {
			t.over = true
			t.end = min(c.w.now, c.deadlines[genKey{t.key.node, t.key.life, t.gen}])
		}
	}
	for _, ss := range c.w.store.sessions {
		if c.w.store.now() >= ss.expires {
			c.expired(ss.id, c.w.store.trueTime(ss.expires))
		}
	}
	// The term invariant, by termcheck: no two terms of one name valid at
	// once (D3), tokens strictly increasing in the order terms began (T2),
	// each elected callback followed by exactly one revoked one once the
	// node's life is over, unless it crashed (L1), and no write accepted
	// below a token accepted before, or with a token no term had (F2, F1).
	terms := make([]termcheck.Term, len(c.order))
	for i, t := range c.order {
		terms[i] = termcheck.Term{Name: t.name, Node: fmt.Sprintf("n%d", t.key.node), Token: int64(t.token),
			Start: t.start, End: t.end, Listened: !t.rejected, Revoked: t.revokedCalls,
			Settled: !c.w.nodes[t.key.node].crashedLife(t.key.life)}
		if t.elected {
			terms[i].Elected = 1
		}
	}
	for _, v := range termcheck.Check(terms, c.writes, termcheck.Options{}).Violations {
		c.violate(ruleOf[v.Kind], "%s", v)
	}
	for _, name := range c.w.p.names {
		// A holder soon after the faults ended.
		first, ok := c.firstAfter[name]
		if !ok {
			first = c.w.now
		}
		gap := first - c.faultsEnd
		c.gap = max(c.gap, gap)
		if bound := liveBound(c.w.p); gap > bound {
			c.violate("liveness", "%s had no holder for %v after the faults ended (bound %v)", name, gap, bound)
		}
	}
}

// ruleOf names the rule of docs/design.md a kind of termcheck violation
// breaks.
var ruleOf = map[termcheck.Kind]string{
	termcheck.Overlap:      "D3",
	termcheck.TokenOrder:   "T2",
	termcheck.Pairing:      "L1",
	termcheck.StaleWrite:   "F2",
	termcheck.UnknownToken: "F1",
}

// crashedLife reports whether the node's core of that life crashed.
func (n *node) crashedLife(life int) bool { return life != n.life }
