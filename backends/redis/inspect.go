package simbaredis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
)

var _ backends.Inspector = (*Backend)(nil)

// inspectPage is how many entries Inspect reads per command, so that no
// command blocks Redis for long however much the namespace holds.
const inspectPage = 1000

// Inspect lists the namespace's live sessions, the leases they hold and the
// groups they joined ([backends.Inspector]), with plain reads (no script): a
// cursor over the sessions, then pipelined reads of each session's records,
// in pages of 1,000 (the leases' records one HMGET of the meta hash per
// page). It changes nothing. The lists are read close together,
// not as one snapshot. A namespace of another layout version is refused with
// an error wrapping [ErrLayout].
func (b *Backend) Inspect(ctx context.Context) (backends.Inventory, error) {
	if b.closed.Load() {
		return backends.Inventory{}, fmt.Errorf("simbaredis: inspect: %w", backends.ErrClosed)
	}
	var inv backends.Inventory
	meta, err := b.client.HMGet(ctx, b.keys.meta(), "layout", "guard").Result()
	if err != nil {
		return inv, b.unavailable(ctx, "inspect", err)
	}
	layout, hasLayout := meta[0].(string)
	if hasLayout && layout != layoutVersion {
		return inv, fmt.Errorf("simbaredis: inspect: namespace %s has key layout version %s, this package uses %s: %w",
			b.keys, layout, layoutVersion, ErrLayout)
	}
	now, err := b.client.Time(ctx).Result()
	if err != nil {
		return inv, b.unavailable(ctx, "inspect", err)
	}
	inv.StoreTime = now.UTC()
	nowUS := now.UnixMicro()
	// The amnesia guard, as the namespace records it: an acquire now would
	// be refused until then. (A loss not yet noticed — a restart nobody
	// has called since — starts its guard at the first guarded call.)
	if g, _ := meta[1].(string); g != "" {
		if f, err := strconv.ParseFloat(g, 64); err == nil && int64(f) > nowUS {
			until := int64(f)
			inv.Recovering = &backends.RecoveringError{Remaining: fromMicros(until - nowUS), Until: storeTime(until),
				MaxLease: b.maxLease, Why: whyRecovering}
		}
	}

	// The live sessions: a cursor over the sessions set.
	expiry := make(map[string]int64)
	for cursor := uint64(0); ; {
		kv, next, err := b.client.ZScan(ctx, b.keys.sessions(), cursor, "", inspectPage).Result()
		if err != nil {
			return inv, b.unavailable(ctx, "inspect", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if e, err := strconv.ParseFloat(kv[i+1], 64); err == nil && int64(e) > nowUS {
				expiry[kv[i]] = int64(e)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	ids := make([]string, 0, len(expiry))
	for id := range expiry {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	// Each session's identity and groups, a page of sessions per pipeline.
	identity := make(map[string]string, len(ids))
	groups := make(map[string]bool)
	for page := range slices.Chunk(ids, inspectPage) {
		pipe := b.client.Pipeline()
		fields := make([]string, len(page))
		for i, id := range page {
			fields[i] = field(fieldIdentity, id)
		}
		who := pipe.HMGet(ctx, b.keys.meta(), fields...)
		joined := make([]*redis.StringSliceCmd, len(page))
		for i, id := range page {
			joined[i] = pipe.SMembers(ctx, b.keys.joined(id))
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return inv, b.unavailable(ctx, "inspect", err)
		}
		for i, id := range page {
			identity[id], _ = who.Val()[i].(string)
			for _, g := range joined[i].Val() {
				groups[g] = true
			}
		}
	}

	// The leases each session holds: a cursor over its owned set, then the
	// lease records, which say whether the session still holds them.
	for _, id := range ids {
		info := backends.SessionInfo{ID: backends.SessionID(id), Identity: identity[id],
			Remaining: fromMicros(expiry[id] - nowUS)}
		var names []string
		for cursor := uint64(0); ; {
			kv, next, err := b.client.ZScan(ctx, b.keys.owned(id), cursor, "", inspectPage).Result()
			if err != nil {
				return inv, b.unavailable(ctx, "inspect", err)
			}
			for i := 0; i+1 < len(kv); i += 2 {
				names = append(names, kv[i])
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		for page := range slices.Chunk(names, inspectPage) {
			fields := make([]string, 0, 3*len(page))
			for _, name := range page {
				fields = append(fields, field(fieldHolder, name), field(fieldToken, name), field(fieldValue, name))
			}
			recs, err := b.client.HMGet(ctx, b.keys.meta(), fields...).Result()
			if err != nil {
				return inv, b.unavailable(ctx, "inspect", err)
			}
			for i, name := range page {
				if holder, _ := recs[3*i].(string); holder != id {
					continue
				}
				tok, _ := recs[3*i+1].(string)
				t, _ := strconv.ParseInt(tok, 10, 64)
				l := backends.LeaseInfo{Name: name, Session: info.ID, Identity: info.Identity, Token: backends.Token(t)}
				if val, ok := recs[3*i+2].(string); ok {
					l.Value = []byte(val)
				}
				inv.Leases = append(inv.Leases, l)
				info.Leases++
			}
		}
		inv.Sessions = append(inv.Sessions, info)
	}

	// The groups the live sessions joined, with their live members.
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	for page := range slices.Chunk(names, inspectPage) {
		pipe := b.client.Pipeline()
		parts := make([]*redis.StringCmd, len(page))
		members := make([]*redis.StringSliceCmd, len(page))
		for i, g := range page {
			parts[i] = pipe.HGet(ctx, b.keys.group(g), "parts")
			members[i] = pipe.SMembers(ctx, b.keys.members(g))
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return inv, b.unavailable(ctx, "inspect", err)
		}
		for i, g := range page {
			n, _ := strconv.Atoi(parts[i].Val())
			gi := backends.GroupInfo{Name: g, Partitions: n}
			for _, m := range members[i].Val() {
				if _, live := expiry[m]; live {
					gi.Members = append(gi.Members, backends.SessionID(m))
				}
			}
			if n == 0 || len(gi.Members) == 0 {
				continue
			}
			slices.Sort(gi.Members)
			inv.Groups = append(inv.Groups, gi)
		}
	}
	slices.SortFunc(inv.Leases, func(a, b backends.LeaseInfo) int { return cmp.Compare(a.Name, b.Name) })
	return inv, nil
}
