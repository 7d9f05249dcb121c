package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Group is a partition group joined by a client. Create it with
// [Client.StartGroup].
type Group struct {
	handle
}

// StartGroup joins the partition group name, whose partition i is the lease
// "name.i" (§13), and runs fn for each partition this member holds: once
// per term if s has neither Rate nor Delay (a task that returns early leaves
// the partition held and idle until a rebalance moves it, so that its work is
// not rerun elsewhere), else on s's schedule, with slots recorded per
// partition.
//
// Members join through their session; the partitions are balanced so that
// every member holds ⌊N/M⌋ or ⌈N/M⌉ of them, moving as few as possible when
// members come and go: a member contends only for its share, and hands its
// highest-numbered surplus over with the hand-off order (the partition's task
// cancelled and awaited, then the lease released). A member that crashes
// loses its partitions to the others once the backend expires its session.
//
// Each change of membership on its own moves the minimum number of
// partitions. When several members leave at once, a leaver whose leave has
// not been applied yet still counts as a member: it may pick up a partition
// another leaver released, then hand it on when it leaves, so such a
// partition moves twice.
//
// With a store that answers promptly and tasks that return when cancelled,
// a join is balanced within two renewal intervals, graceful leaves (one or
// several at once) at once, and a crash within LeaseDuration plus two
// renewal intervals (the runtime's group tests check these bounds).
//
// The partition count is recorded by the first member; joining with another
// count fails. StartGroup does not wait for the join, so the failure is
// reported later: in the group's [GroupStatus.LastError] and as an
// EventBackendError, logged as a warning, whose error names the group and
// this member's count and wraps the backend's error (which gives the
// group's count) and [backends.ErrGroupMismatch]. The join is retried, so
// the member joins once every member with the other count has left.
//
// partitions must be in [1, 65536] and every partition lease a valid name.
func (c *Client) StartGroup(name string, partitions int, s Schedule, fn PartitionFunc) (*Group, error) {
	if fn == nil {
		return nil, fmt.Errorf("simba: StartGroup: nil function: %w", ErrNilArgument)
	}
	if err := backends.ValidateGroup(name, partitions); err != nil {
		return nil, fmt.Errorf("simba: start group: %w", err)
	}
	if err := validateSchedule(s, c.cfg, true); err != nil {
		return nil, fmt.Errorf("simba: start group %q: %w", name, err)
	}
	s, err := c.withTimetable(s, name)
	if err != nil {
		return nil, fmt.Errorf("simba: start group %q: %w", name, err)
	}
	if _, ok := c.d.backend.(backends.StoreClock); !vocab.Once(s) && !ok {
		return nil, fmt.Errorf("simba: start group %q: the backend (%T) has no store clock to number slots with", name, c.d.backend)
	}
	id, err := c.d.startGroup(engine.StartGroup{Name: name, N: partitions, Schedule: s}, fn)
	if err != nil {
		return nil, fmt.Errorf("simba: start group %q: %w", name, err)
	}
	return &Group{handle{d: c.d, name: name, group: id}}, nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Partitions returns the partitions this member holds a valid term for, in
// ascending order.
func (g *Group) Partitions() (held []int) {
	g.d.query(func(m *engine.Machine) { held = m.HeldPartitions(g.group) })
	return held
}

// Stop hands every partition over with the hand-off order and leaves the
// group; ctx bounds only the wait. Called from inside a partition task (with
// its context), it queues the stop and returns nil (L5).
func (g *Group) Stop(ctx context.Context) error { return g.stop(ctx) }

// StepDown hands every partition over and leaves the group for cooldown,
// then joins again (§13: a member in a step-down cooldown leaves the
// group).
func (g *Group) StepDown(ctx context.Context, cooldown time.Duration) error {
	return g.stepDown(ctx, cooldown)
}
