package runtime

import (
	"time"

	"github.com/simba-go/simba/backends"
)

// The state machine's outputs. The driver (Client) performs them in order;
// a simulator may perform them any way it likes, with delays and faults.

type effectKind uint8

const (
	effSend      effectKind = iota + 1 // send req to the backend; answer with machine.done
	effDispatch                        // run a listener callback on c's serial dispatcher; answer with callbackDone
	effStartTask                       // run c's task for term; answer with taskDone
	effEvent                           // deliver ev to the observers
	effComplete                        // complete waiter w with (term, err)
	effWatch                           // watch releases of name on session gen; answer with notified
	effUnwatch                         // stop watching name on session gen
	effShutdown                        // the machine has closed; no more inputs matter
)

type effect struct {
	kind    effectKind
	req     request
	c       *contender
	term    *Term
	elected bool // effDispatch: the elected callback (else revoked)
	ev      Event
	w       waiter
	err     error
}

// waiter is an opaque completion handle of the driver's (a channel); the
// machine only hands it back in an effComplete.
type waiter any

type reqKind uint8

const (
	reqOpen reqKind = iota + 1
	reqKeepAlive
	reqOwned
	reqAcquire
	reqRelease
	reqClose
	reqPutValue
	reqJoin
	reqLeave
	reqMembers
)

var reqNames = [...]string{"", "open session", "keep-alive", "owned", "acquire", "release", "close session",
	"put value", "join", "leave", "members"}

func (k reqKind) String() string { return reqNames[k] }

// request is one backend call. gen names the session it is made on (0 for
// reqOpen, which creates session gen).
type request struct {
	id      uint64
	kind    reqKind
	gen     uint64
	name    string
	token   Token
	value   []byte // reqPutValue
	group   string // reqJoin, reqLeave, reqMembers
	n       int    // reqJoin: partitions
	ttl     time.Duration
	timeout time.Duration
}

// result is a backend reply; only the fields of the request's kind are set.
type result struct {
	session backends.SessionID // reqOpen
	renewal backends.Renewal   // reqOpen, reqKeepAlive
	grant   backends.Grant     // reqAcquire
	held    []backends.Held    // reqOwned
	digest  backends.Digest    // reqOwned, reqRelease
	view    backends.GroupView // reqMembers
	err     error
}
