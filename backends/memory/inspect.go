package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
)

// Inspect lists the store's live sessions, held leases and groups
// ([backends.Inspector]), read in one call under the store's mutex. It
// changes nothing: unlike the other calls it does not reap the sessions
// that expired, which it leaves out of the lists.
func (s *Store) Inspect(ctx context.Context) (backends.Inventory, error) {
	var inv backends.Inventory
	err := s.call(ctx, mInspect, func(now int64) error {
		inv.StoreTime = storeTime(now)
		inv.Recovering = s.recovering(now)
		live := func(rec *sessionRec) bool { return rec.expiry > now }
		for _, rec := range s.sessions {
			if live(rec) {
				inv.Sessions = append(inv.Sessions, backends.SessionInfo{
					ID: rec.id, Identity: rec.identity, Remaining: time.Duration(rec.expiry - now), Leases: len(rec.owned),
				})
			}
		}
		for name, l := range s.leases {
			if live(l.holder) {
				inv.Leases = append(inv.Leases, backends.LeaseInfo{
					Name: name, Session: l.holder.id, Identity: l.holder.identity, Token: l.token, Value: clone(s.values[name]),
				})
			}
		}
		for name, g := range s.groups {
			gi := backends.GroupInfo{Name: name, Partitions: g.partitions}
			for id, rec := range g.members {
				if live(rec) {
					gi.Members = append(gi.Members, id)
				}
			}
			if len(gi.Members) > 0 {
				slices.Sort(gi.Members)
				inv.Groups = append(inv.Groups, gi)
			}
		}
		return nil
	})
	if err != nil {
		return backends.Inventory{}, err
	}
	slices.SortFunc(inv.Sessions, func(a, b backends.SessionInfo) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(inv.Leases, func(a, b backends.LeaseInfo) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(inv.Groups, func(a, b backends.GroupInfo) int { return cmp.Compare(a.Name, b.Name) })
	return inv, err
}

// recovering returns the amnesia guard's refusal at now, or nil outside
// the guard. The caller holds the store's mutex.
func (s *Store) recovering(now int64) *backends.RecoveringError {
	if now >= s.guardUntil {
		return nil
	}
	return &backends.RecoveringError{Remaining: time.Duration(s.guardUntil - now), Until: storeTime(s.guardUntil),
		MaxLease: s.maxLease, Why: "the store restarted and lost its state (Faults.Restart)"}
}
