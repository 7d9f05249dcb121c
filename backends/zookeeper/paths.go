package simbazk

import (
	"fmt"
	"strconv"
	"strings"
)

// layout builds the paths under a root r (see the package documentation):
//
//	r                 the root: layout version, guard, token floor
//	r/clock           written by StoreTime: its mtime is the store's clock
//	r/o/<sid>         a session (container): identity; children: "@" and leases held
//	r/o/<sid>/@       ephemeral: the session is alive
//	r/o/<sid>/<name>  ephemeral: a lease the session holds
//	r/l/<name>        ephemeral lease node: "<sid>\n<identity>"; token base + czxid
//	r/q/<name>        container: the queue of reservations of name (queue.go)
//	r/q/<name>/<sid>-<seq>  ephemeral sequential: a reservation, "<sid>\n<identity>"
//	r/v/<name>        persistent value node
//	r/g/<group>       persistent group node: partition count; children below
//	r/g/<group>/m:<sid>      ephemeral: a member
//	r/g/<group>/h:<i>:<sid>  ephemeral: the holder of partition i
type layout struct{ root string }

// markerName is the child of a session node that says it is alive; lease
// names cannot be "@" (T1).
const markerName = "@"

func (l layout) clock() string                 { return l.root + "/clock" }
func (l layout) sessions() string              { return l.root + "/o" }
func (l layout) session(sid string) string     { return l.root + "/o/" + sid }
func (l layout) marker(sid string) string      { return l.root + "/o/" + sid + "/" + markerName }
func (l layout) owned(sid, name string) string { return l.root + "/o/" + sid + "/" + name }
func (l layout) leases() string                { return l.root + "/l" }
func (l layout) lease(name string) string      { return l.root + "/l/" + name }
func (l layout) queues() string                { return l.root + "/q" }
func (l layout) queue(name string) string      { return l.root + "/q/" + name }
func (l layout) values() string                { return l.root + "/v" }
func (l layout) value(name string) string      { return l.root + "/v/" + name }
func (l layout) groups() string                { return l.root + "/g" }
func (l layout) group(g string) string         { return l.root + "/g/" + g }
func (l layout) member(g, sid string) string   { return l.root + "/g/" + g + "/m:" + sid }
func (l layout) holder(g string, i int, sid string) string {
	return l.root + "/g/" + g + "/h:" + strconv.Itoa(i) + ":" + sid
}

// reservationPrefix is the path a session's sequential reservation node
// of name is created with; ZooKeeper appends the sequence number.
func (l layout) reservationPrefix(name, sid string) string {
	return l.root + "/q/" + name + "/" + sid + "-"
}

// reservationSeq parses a child of a queue node: its session and sequence
// number.
func reservationSeq(child string) (sid string, seq int64, ok bool) {
	sid, digits, ok := strings.Cut(child, "-")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return sid, n, err == nil
}

// firstReservation returns the child of a queue node with the lowest
// sequence number, or "".
func firstReservation(children []string) string {
	first, low := "", int64(0)
	for _, c := range children {
		if _, n, ok := reservationSeq(c); ok && (first == "" || n < low) {
			first, low = c, n
		}
	}
	return first
}

// leaseData is the data of a lease node: the holder's session and identity.
func leaseData(sid, identity string) []byte { return []byte(sid + "\n" + identity) }

func parseLeaseData(data []byte) (sid, identity string) {
	sid, identity, _ = strings.Cut(string(data), "\n")
	return sid, identity
}

// groupChildren splits the children of a group node into members and
// partition holders.
func groupChildren(children []string) (members []string, holders map[int]string) {
	holders = make(map[int]string)
	for _, c := range children {
		switch {
		case strings.HasPrefix(c, "m:"):
			members = append(members, c[2:])
		case strings.HasPrefix(c, "h:"):
			idx, sid, ok := strings.Cut(c[2:], ":")
			if i, err := strconv.Atoi(idx); ok && err == nil && i >= 0 {
				holders[i] = sid
			}
		}
	}
	return members, holders
}

// sessionID formats a ZooKeeper session id as a SessionID.
func sessionID(id int64) string { return fmt.Sprintf("%016x", uint64(id)) }
