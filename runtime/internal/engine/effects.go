package engine

import (
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Mono is a point on the driver's monotonic clock, as the time elapsed since
// an epoch the driver chose. The core never reads a clock: every input
// carries its Mono.
type Mono = time.Duration

// Token is a fencing token (backends.Token).
type Token = backends.Token

// The ids the core and its driver share. The driver chooses ContenderID,
// GroupID and Waiter values (never 0); the core chooses TermID and
// RequestID values, and the ContenderIDs of partitions, which have
// PartitionBit set.
type (
	ContenderID uint64 // an election, lock, schedule or partition
	GroupID     uint64 // a partition group
	TermID      uint64 // a term
	RequestID   uint64 // a backend call
	Waiter      uint64 // a caller waiting for a Complete effect
)

// PartitionBit is set in the ContenderIDs the core gives to partitions.
const PartitionBit ContenderID = 1 << 63

// EffectKind says what an Effect asks the driver to do.
type EffectKind uint8

// The effects. The driver performs them in order.
const (
	// EffSend: make the backend call Req; answer with a Reply.
	EffSend EffectKind = iota + 1
	// EffTermStarted: a term Term of contender Contender began, for lease
	// Name with Token, on session generation Gen; Lock says it is a lock's.
	EffTermStarted
	// EffTermEnded: Term ended for Reason (revoked: Valid is false from now).
	EffTermEnded
	// EffSetDeadline: session generation Gen's local deadline is now At.
	EffSetDeadline
	// EffDispatch: run contender Contender's elected (Elected) or revoked
	// callback for Term on its serial dispatcher; answer with CallbackDone,
	// or DispatchFailed if an elected callback cannot be dispatched. A
	// revoked callback can be asked for before the core has stepped the
	// DispatchFailed of its elected one: the driver skips it (answering
	// CallbackDone), so that callbacks stay paired (L6).
	EffDispatch
	// EffStartTask: run the task of Contender (or of Group's Partition) for
	// Term; answer with TaskDone.
	EffStartTask
	// EffStartRun: run one scheduled run of Contender (or of Group's
	// Partition) for Term, for the fixed-rate slot Slot if HasSlot; answer
	// with RunDone.
	EffStartRun
	// EffEvent: deliver Event to the log and the observer.
	EffEvent
	// EffComplete: complete Waiter with Term (0 for none) and Err.
	EffComplete
	// EffWatch: watch releases of Name on session generation Gen; answer
	// each with Released.
	EffWatch
	// EffUnwatch: stop watching Name on session generation Gen.
	EffUnwatch
	// EffForget: the core no longer refers to Term (if set) or to
	// Contender (if set); the driver may drop what it keeps for them.
	EffForget
	// EffShutdown: the client has closed; no input matters any more.
	EffShutdown
)

var effectNames = [...]string{"", "send", "term-started", "term-ended", "set-deadline", "dispatch", "start-task",
	"start-run", "event", "complete", "watch", "unwatch", "forget", "shutdown"}

// String returns the kind's name, as in traces.
func (k EffectKind) String() string {
	if int(k) >= len(effectNames) {
		return "unknown"
	}
	return effectNames[k]
}

// Effect is one output of the core. It is one tagged struct, so that
// appending effects allocates nothing once the buffer has grown; only the
// fields of its Kind are set.
type Effect struct {
	Kind      EffectKind
	Req       Request     // EffSend
	Contender ContenderID // EffTermStarted, EffDispatch, EffStartTask, EffStartRun, EffForget
	Group     GroupID     // EffStartTask, EffStartRun: the partition's group, 0 if none
	Partition int         // EffStartTask, EffStartRun: the partition's index
	Term      TermID
	Elected   bool         // EffDispatch
	Lock      bool         // EffTermStarted
	Quiet     bool         // EffTermStarted: no callback, task, run or waiter will refer to the term (see LeaderTermInfo)
	Name      string       // EffTermStarted, EffWatch, EffUnwatch
	Token     Token        // EffTermStarted
	Gen       uint64       // EffTermStarted, EffSetDeadline, EffWatch, EffUnwatch
	At        Mono         // EffSetDeadline
	Reason    vocab.Reason // EffTermEnded
	Slot      time.Time
	HasSlot   bool
	Event     vocab.Event // EffEvent
	Waiter    Waiter      // EffComplete
	Err       error       // EffComplete
}

// ReqKind says which backend call a Request is.
type ReqKind uint8

// The backend calls.
const (
	ReqOpen ReqKind = iota + 1
	ReqKeepAlive
	ReqOwned
	ReqAcquire
	ReqRelease
	ReqClose
	ReqPutValue
	ReqJoin
	ReqLeave
	ReqMembers
	ReqStoreTime
)

var reqNames = [...]string{"", "open session", "keep-alive", "owned", "acquire", "release", "close session",
	"put value", "join", "leave", "members", "store time"}

// String returns the call in words.
func (k ReqKind) String() string {
	if int(k) >= len(reqNames) {
		return "unknown"
	}
	return reqNames[k]
}

// Request is one backend call. Gen names the session it is made on (for
// ReqOpen, the session it creates; ReqStoreTime is a call on the backend,
// answered for session Gen). Every call is bounded by Timeout (D2).
type Request struct {
	ID      RequestID
	Kind    ReqKind
	Gen     uint64
	Name    string
	Token   Token
	Value   []byte // ReqPutValue
	Group   string // ReqJoin, ReqLeave, ReqMembers
	N       int    // ReqJoin: partitions
	TTL     time.Duration
	Timeout time.Duration
	Again   bool // ReqClose: the core may send it again if it fails; the driver keeps the session until then
}

// Result is a backend reply; only the fields of the request's kind are set.
type Result struct {
	Session   backends.SessionID // ReqOpen
	Renewal   backends.Renewal   // ReqOpen, ReqKeepAlive
	Grant     backends.Grant     // ReqAcquire
	Held      []backends.Held    // ReqOwned
	Digest    backends.Digest    // ReqOwned, ReqRelease
	View      backends.GroupView // ReqMembers
	StoreTime time.Time          // ReqStoreTime
	Err       error
}
