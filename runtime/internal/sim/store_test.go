package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// store is the simulated backend: sessions that expire on the store's own
// clock, leases with tokens from one counter, release notifications, and
// restarts that keep or lose the state (with the amnesia guard, as the
// memory and Redis backends have it).
type store struct {
	w        *world
	rate     float64       // store seconds per true second
	maxLease time.Duration // grants are clamped to this (C2)
	offset   time.Duration // store time at true time 0

	sessions  map[backends.SessionID]*storeSession
	leases    map[string]*storeLease
	values    map[string][]byte // the lease values written (PutValue), which outlive the leases
	lastToken engine.Token
	nextID    int
	guard     time.Duration // no grants before this store time (amnesia guard)
	downUntil time.Duration // true time until which the store answers nothing
}

type storeSession struct {
	id      backends.SessionID
	ttl     time.Duration // granted
	expires time.Duration // store time
	owned   map[string]engine.Token
	version uint64
}

type storeLease struct {
	holder *storeSession
	token  engine.Token
}

func newStore(w *world, rate float64, maxLease time.Duration) *store {
	return &store{w: w, rate: rate, maxLease: maxLease, offset: time.Duration(1_000_000) * time.Second,
		sessions: map[backends.SessionID]*storeSession{}, leases: map[string]*storeLease{}, values: map[string][]byte{}}
}

// now is the store's clock at true time t.
func (s *store) now() time.Duration {
	return s.offset + time.Duration(float64(s.w.now)*s.rate)
}

// trueTime is the true time at which the store's clock reads st.
func (s *store) trueTime(st time.Duration) time.Duration {
	return time.Duration(float64(st-s.offset) / s.rate)
}

// live returns the session id if it has not expired, reaping it otherwise.
func (s *store) live(id backends.SessionID) *storeSession {
	ss := s.sessions[id]
	if ss == nil {
		return nil
	}
	if s.now() >= ss.expires {
		s.w.check.expired(ss.id, s.trueTime(ss.expires))
		s.drop(ss)
		return nil
	}
	return ss
}

// drop ends a session: its leases are freed and their watchers woken.
func (s *store) drop(ss *storeSession) {
	delete(s.sessions, ss.id)
	names := make([]string, 0, len(ss.owned))
	for name := range ss.owned {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if l := s.leases[name]; l != nil && l.holder == ss {
			delete(s.leases, name)
			s.w.broadcast(name)
		}
	}
}

func (s *store) digest(ss *storeSession) backends.Digest {
	return backends.Digest{Leases: len(ss.owned), Version: ss.version}
}

var errExpired = fmt.Errorf("sim: %w", backends.ErrSessionExpired)

// handle performs one request from node n, whose session for the request is
// id (empty for ReqOpen), and returns the reply.
func (s *store) handle(req engine.Request, id backends.SessionID) engine.Result {
	now := s.now()
	var res engine.Result
	if req.Kind == engine.ReqOpen {
		grant := min(req.TTL, s.maxLease)
		s.nextID++
		ss := &storeSession{id: backends.SessionID(fmt.Sprintf("s%d", s.nextID)), ttl: grant, expires: now + grant,
			owned: map[string]engine.Token{}}
		s.sessions[ss.id] = ss
		res.Session = ss.id
		res.Renewal = backends.Renewal{Remaining: grant, StoreTime: time.Unix(0, 0).Add(now), Digest: s.digest(ss)}
		return res
	}
	ss := s.live(id)
	if ss == nil && req.Kind != engine.ReqStoreTime {
		res.Err = errExpired
		return res
	}
	switch req.Kind {
	case engine.ReqKeepAlive:
		ss.expires = now + ss.ttl
		res.Renewal = backends.Renewal{Remaining: ss.ttl, StoreTime: time.Unix(0, 0).Add(now), Digest: s.digest(ss)}
	case engine.ReqAcquire:
		if l := s.leases[req.Name]; l != nil && s.live(l.holder.id) != nil {
			if l.holder == ss {
				res.Grant = backends.Grant{Token: l.token, Value: s.values[req.Name], Digest: s.digest(ss)}
				return res
			}
			res.Err = fmt.Errorf("sim: %w", &backends.HeldError{Name: req.Name,
				Holder: backends.Holder{Session: l.holder.id, Token: l.token, Remaining: l.holder.expires - now}})
			return res
		}
		if now < s.guard {
			res.Err = fmt.Errorf("sim: %w for %v: %w", backends.ErrRecovering, s.guard-now, backends.ErrLeaseHeld)
			return res
		}
		s.lastToken = max(s.lastToken+1, engine.Token(now/time.Microsecond))
		s.leases[req.Name] = &storeLease{holder: ss, token: s.lastToken}
		ss.owned[req.Name] = s.lastToken
		ss.version++
		res.Grant = backends.Grant{Token: s.lastToken, Value: s.values[req.Name], Digest: s.digest(ss)}
	case engine.ReqRelease:
		// A release without a token (0) releases whatever term the session
		// holds, as a store without a token check would: only the
		// release-without-token mutant sends one.
		if l := s.leases[req.Name]; l != nil && l.holder == ss && (l.token == req.Token || req.Token == 0) {
			delete(s.leases, req.Name)
			delete(ss.owned, req.Name)
			ss.version++
			s.w.broadcast(req.Name)
		}
		res.Digest = s.digest(ss)
	case engine.ReqOwned:
		names := make([]string, 0, len(ss.owned))
		for name := range ss.owned {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			res.Held = append(res.Held, backends.Held{Name: name, Token: ss.owned[name]})
		}
		res.Digest = s.digest(ss)
	case engine.ReqClose:
		s.drop(ss)
	case engine.ReqStoreTime:
		res.StoreTime = time.Unix(0, 0).Add(now)
	case engine.ReqPutValue:
		// Fenced: only the holder's term writes.
		if l := s.leases[req.Name]; l != nil && l.holder == ss && l.token == req.Token {
			s.values[req.Name] = req.Value
			s.w.tracef("store took %s#%d's value %q", req.Name, req.Token, req.Value)
			if req.Name == cronName {
				s.w.cron.took(s.w.now, req.Token, req.Value)
			}
		} else {
			res.Err = fmt.Errorf("sim: %w", backends.ErrNotHolder)
		}
	default:
		res.Err = errors.New("sim: the simulated store does not do " + req.Kind.String())
	}
	return res
}

// restart takes the store down for d of true time; amnesiac, it loses every
// session and lease, and grants nothing until its longest lease has passed
// on its clock (the amnesia guard). Tokens go on from the store's clock.
func (s *store) restart(d time.Duration, amnesiac bool) {
	s.downUntil = s.w.now + d
	if !amnesiac {
		return
	}
	names := make([]string, 0, len(s.leases))
	for name := range s.leases {
		names = append(names, name)
	}
	slices.Sort(names)
	up := s.offset + time.Duration(float64(s.downUntil)*s.rate)
	s.guard = up + s.maxLease
	ids := make([]backends.SessionID, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		// Lost now, but no lease is granted before the guard ends: that is
		// when the sessions' terms must have ended.
		s.w.check.expired(id, s.trueTime(s.guard))
	}
	clear(s.sessions)
	clear(s.leases)
	clear(s.values)
	s.w.cron.amnesia = s.w.now
	for _, name := range names {
		s.w.broadcast(name) // the memory backend wakes every watcher at a restart
	}
	s.lastToken = 0
}
