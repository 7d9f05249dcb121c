package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// DescribeInput returns one line of text for an input, for traces.
func DescribeInput(in Input) string {
	switch in := in.(type) {
	case Start:
		var b strings.Builder
		fmt.Fprintf(&b, "start c%d %s %s", in.ID, in.Kind, in.Name)
		addFlag(&b, in.Listener, "listener")
		addFlag(&b, in.Task, "task")
		addFlag(&b, in.TryOnce, "try-once")
		if in.Waiter != 0 {
			fmt.Fprintf(&b, " w%d", in.Waiter)
		}
		if in.Kind == KindSchedule {
			fmt.Fprintf(&b, " %s", describeSchedule(in.Schedule))
		}
		return b.String()
	case StartGroup:
		return fmt.Sprintf("start-group g%d %s n=%d %s", in.ID, in.Name, in.N, describeSchedule(in.Schedule))
	case Stop:
		return fmt.Sprintf("stop c%d%s w%d", in.ID, describeStepDown(in.StepDown, in.Cooldown), in.Waiter)
	case StopGroup:
		return fmt.Sprintf("stop-group g%d%s w%d", in.ID, describeStepDown(in.StepDown, in.Cooldown), in.Waiter)
	case Unlock:
		return fmt.Sprintf("unlock t%d w%d", in.Term, in.Waiter)
	case Abandon:
		return fmt.Sprintf("abandon c%d", in.ID)
	case Close:
		return fmt.Sprintf("close w%d", in.Waiter)
	case Reply:
		return fmt.Sprintf("reply #%d %s", in.ID, describeResult(in.Result))
	case Released:
		return fmt.Sprintf("released gen=%d %s", in.Gen, in.Name)
	case TaskDone:
		return fmt.Sprintf("task-done t%d%s", in.Term, describeErr(in.Err, in.Canceled))
	case RunDone:
		return fmt.Sprintf("run-done t%d%s", in.Term, describeErr(in.Err, in.Canceled))
	case CallbackDone:
		return fmt.Sprintf("callback-done c%d", in.ID)
	case DispatchFailed:
		return fmt.Sprintf("dispatch-failed c%d t%d err=%q", in.ID, in.Term, errText(in.Err))
	}
	return fmt.Sprintf("unknown input %T", in)
}

// DescribeEffect returns one line of text for an effect, for traces.
func DescribeEffect(e Effect) string {
	switch e.Kind {
	case EffSend:
		return "send " + DescribeRequest(e.Req)
	case EffTermStarted:
		lock := ""
		if e.Lock {
			lock = " lock"
		}
		return fmt.Sprintf("term-started t%d %s %s#%d gen=%d%s", e.Term, cid(e.Contender), e.Name, e.Token, e.Gen, lock)
	case EffTermEnded:
		return fmt.Sprintf("term-ended t%d %s", e.Term, e.Reason)
	case EffSetDeadline:
		return fmt.Sprintf("set-deadline gen=%d at=%v", e.Gen, e.At)
	case EffDispatch:
		which := "revoked"
		if e.Elected {
			which = "elected"
		}
		return fmt.Sprintf("dispatch %s t%d %s", cid(e.Contender), e.Term, which)
	case EffStartTask, EffStartRun:
		s := fmt.Sprintf("%s %s t%d", e.Kind, cid(e.Contender), e.Term)
		if e.Group != 0 {
			s += fmt.Sprintf(" g%d.%d", e.Group, e.Partition)
		}
		if e.HasSlot {
			s += " slot=" + e.Slot.UTC().Format(time.RFC3339Nano)
		}
		return s
	case EffEvent:
		return "event " + DescribeEvent(e.Event)
	case EffComplete:
		s := fmt.Sprintf("complete w%d", e.Waiter)
		if e.Term != 0 {
			s += fmt.Sprintf(" t%d", e.Term)
		}
		if e.Err != nil {
			s += fmt.Sprintf(" err=%q", errText(e.Err))
		}
		return s
	case EffWatch, EffUnwatch:
		return fmt.Sprintf("%s gen=%d %s", e.Kind, e.Gen, e.Name)
	case EffForget:
		if e.Term != 0 {
			return fmt.Sprintf("forget t%d", e.Term)
		}
		return "forget " + cid(e.Contender)
	case EffShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("unknown effect %d", e.Kind)
}

// cid names a contender in traces: c<n>, or p<n> for a partition.
func cid(id ContenderID) string {
	if id&PartitionBit != 0 {
		return fmt.Sprintf("p%d", id&^PartitionBit)
	}
	return fmt.Sprintf("c%d", id)
}

// DescribeRequest returns one line of text for a backend call.
func DescribeRequest(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s gen=%d", r.ID, r.Kind, r.Gen)
	if r.Name != "" {
		b.WriteString(" " + r.Name)
	}
	if r.Token != 0 {
		fmt.Fprintf(&b, "#%d", r.Token)
	}
	if r.Group != "" {
		fmt.Fprintf(&b, " group=%s", r.Group)
	}
	if r.N != 0 {
		fmt.Fprintf(&b, " n=%d", r.N)
	}
	if r.Value != nil {
		fmt.Fprintf(&b, " value=%q", r.Value)
	}
	if r.TTL != 0 {
		fmt.Fprintf(&b, " ttl=%v", r.TTL)
	}
	fmt.Fprintf(&b, " timeout=%v", r.Timeout)
	return b.String()
}

// DescribeEvent returns one line of text for an event.
func DescribeEvent(e vocab.Event) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(e.Kind.String(), " ", "-"))
	if e.Name != "" {
		b.WriteString(" " + e.Name)
	}
	if e.Token != 0 {
		fmt.Fprintf(&b, "#%d", e.Token)
	}
	if e.Session != "" {
		fmt.Fprintf(&b, " session=%s", e.Session)
	}
	if e.Kind == vocab.EventSessionState {
		fmt.Fprintf(&b, " state=%s", e.State)
	}
	if e.Reason != vocab.ReasonNotEnded {
		fmt.Fprintf(&b, " reason=%q", e.Reason)
	}
	if e.Duration != 0 {
		fmt.Fprintf(&b, " duration=%v", e.Duration)
	}
	if e.Group != "" {
		fmt.Fprintf(&b, " group=%s.%d", e.Group, e.Partition)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " err=%q", errText(e.Err))
	}
	return b.String()
}

func describeResult(r Result) string {
	var parts []string
	if r.Session != "" {
		parts = append(parts, "session="+string(r.Session))
	}
	if r.Renewal.Remaining != 0 {
		parts = append(parts, fmt.Sprintf("remaining=%v", r.Renewal.Remaining))
	}
	if d := r.Renewal.Digest; d.Version != 0 || d.Leases != 0 || d.Groups != 0 {
		parts = append(parts, fmt.Sprintf("digest=%d/%d/%d", d.Leases, d.Version, d.Groups))
	}
	if r.Grant.Token != 0 {
		parts = append(parts, fmt.Sprintf("token=%d", r.Grant.Token))
	}
	if len(r.Grant.Value) > 0 {
		parts = append(parts, fmt.Sprintf("value=%q", r.Grant.Value))
	}
	for _, h := range r.Held {
		parts = append(parts, fmt.Sprintf("held=%s#%d", h.Name, h.Token))
	}
	if d := r.Digest; d.Version != 0 || d.Leases != 0 {
		parts = append(parts, fmt.Sprintf("digest=%d/%d", d.Leases, d.Version))
	}
	if len(r.View.Members) > 0 {
		parts = append(parts, fmt.Sprintf("members=%v holders=%v", r.View.Members, r.View.Holders))
	}
	if !r.StoreTime.IsZero() {
		parts = append(parts, "store-time="+r.StoreTime.UTC().Format(time.RFC3339Nano))
	}
	if r.Err != nil {
		parts = append(parts, fmt.Sprintf("err=%q", errText(r.Err)))
	}
	if len(parts) == 0 {
		return "ok"
	}
	return strings.Join(parts, " ")
}

func describeSchedule(s vocab.Schedule) string {
	return fmt.Sprintf("rate=%v delay=%v initial=%v step=%v", s.Rate, s.Delay, s.Initial, s.Step)
}

func describeStepDown(stepDown bool, cooldown time.Duration) string {
	if !stepDown {
		return ""
	}
	return fmt.Sprintf(" step-down=%v", cooldown)
}

func describeErr(err error, canceled bool) string {
	s := ""
	if err != nil {
		s = fmt.Sprintf(" err=%q", errText(err))
	}
	if canceled {
		s += " canceled"
	}
	return s
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func addFlag(b *strings.Builder, on bool, name string) {
	if on {
		b.WriteString(" " + name)
	}
}

var kindNames = [...]string{"election", "lock", "schedule", "partition"}

// String returns the kind in words.
func (k Kind) String() string {
	if int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}
