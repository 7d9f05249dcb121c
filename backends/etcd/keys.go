package simbaetcd

import "strings"

// layout names the backend's keys under its prefix p (which ends in "/"):
//
//	p meta              layout version and token base; its CreateRevision is rev0
//	p guard             the amnesia guard: exists, on a lease of MaxLease, after p meta is created
//	p s/<sid>           a session: its identity, on the session's etcd lease; Put once per acquire
//	p r/<sid>           the session's release counter, on its lease; Put once per release
//	p l/<name>          a lease: "<sid>\n<identity>", on the holder's etcd lease
//	p v/<name>          the value of a lease, kept without a lease (values outlive terms)
//	p g/<group>/n       a group's partition count, kept without a lease
//	p g/<group>/e       a group's epoch: Put at every join, leave and change of a partition's holder
//	p g/<group>/m/<sid> a member, on its session's lease
type layout struct{ p string }

func (l layout) meta() string               { return l.p + "meta" }
func (l layout) guard() string              { return l.p + "guard" }
func (l layout) session(sid string) string  { return l.p + "s/" + sid }
func (l layout) sessions() string           { return l.p + "s/" }
func (l layout) released(sid string) string { return l.p + "r/" + sid }
func (l layout) lease(name string) string   { return l.p + "l/" + name }
func (l layout) leases() string             { return l.p + "l/" }
func (l layout) value(name string) string   { return l.p + "v/" + name }
func (l layout) values() string             { return l.p + "v/" }
func (l layout) groups() string             { return l.p + "g/" }
func (l layout) count(group string) string  { return l.p + "g/" + group + "/n" }
func (l layout) epoch(group string) string  { return l.p + "g/" + group + "/e" }
func (l layout) members(group string) string {
	return l.p + "g/" + group + "/m/"
}
func (l layout) member(group, sid string) string { return l.members(group) + sid }

// partitions is the prefix of the lease keys of group's partitions (and of
// any name that starts with the group's name and a dot).
func (l layout) partitions(group string) string { return l.p + "l/" + group + "." }

// leaseRecord is the value of a lease key: the holder's session id and
// identity.
func leaseRecord(sid, identity string) string { return sid + "\n" + identity }

func parseLeaseRecord(v []byte) (sid, identity string) {
	sid, identity, _ = strings.Cut(string(v), "\n")
	return sid, identity
}
