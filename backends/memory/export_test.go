package memory

import (
	"fmt"
	"slices"
	"strings"
)

// State describes everything the store holds, for tests that check that a
// call changed nothing: the run, the guard, the counters, every session
// (with its place in the expiry heap), lease, value and group.
func (s *Store) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	add("run %s guard %d token %d rev %d heap %d pending %d %v", s.runID, s.guardUntil, s.lastToken, s.rev,
		len(s.expiries), len(s.pending), s.pendingAll)
	for id, rec := range s.sessions {
		groups := make([]string, 0, len(rec.groups))
		for g := range rec.groups {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		add("session %s %q ttl %v expiry %d index %d owned %v version %d left %d groups %v",
			id, rec.identity, rec.ttl, rec.expiry, rec.index, rec.owned, rec.version, rec.memberRev, groups)
	}
	for name, l := range s.leases {
		add("lease %s %s %d", name, l.holder.id, l.token)
	}
	for name, v := range s.values {
		add("value %s %q", name, v)
	}
	for name, g := range s.groups {
		members := make([]string, 0, len(g.members))
		for id := range g.members {
			members = append(members, string(id))
		}
		slices.Sort(members)
		add("group %s %d epoch %d %v", name, g.partitions, g.epoch, members)
	}
	slices.Sort(lines[1:])
	return strings.Join(lines, "\n")
}
