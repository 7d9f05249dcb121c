package simbaredis

import "strings"

// layoutVersion is the version of the key layout and of the scripts that
// read and write it. It is stored in the namespace's meta hash; a script that
// finds another version refuses to run ([ErrLayout]), so that two versions of
// this package never share a namespace silently.
//
// Version 5 keeps the state of sessions and leases in fields of the meta hash
// rather than in a hash each, so that an acquire or a release reads it with
// the token counter in one command and writes it in one (see scripts.go).
const layoutVersion = "5"

// metaAbout is the about field of the meta hash: what the namespace is, for
// people who come across it. It is longer than 64 bytes on purpose: Redis
// keeps a hash with a value that long as a hash table (hash-max-listpack-value
// is 64 by default) rather than a listpack, whose every field read or write
// scans it, and every write reallocates it; the hot scripts read and write
// several fields of the meta hash per call, and as a hash table it cost an
// acquire and a release together about 3 µs of Redis time less on the test
// machine. TestMetaHashTable checks it.
const metaAbout = "Simba leases, key layout " + layoutVersion + ": github.com/simba-go/simba/backends/redis (keys.go)"

// The key layout of a namespace, defined here and nowhere else: the Go side
// builds keys with [layout] and meta fields with [field], and the Lua
// helpers below get the same tags from these constants. Every key starts
// with the hash tag "{prefix}", so that a namespace lives in one Redis
// Cluster slot.
//
//	{p}:meta          hash: the namespace's fields, and the fields of its
//	                  sessions and leases (below)
//	{p}:sessions      zset: session id → expiry (µs of Redis time), the
//	                  order in which sessions are reaped
//	{p}:o:<id>        zset: lease name → token, the leases the session holds
//	{p}:j:<id>        set: the groups the session joined
//	{p}:g:<group>     hash: parts, epoch; exists while the group has members
//	{p}:m:<group>     set: the group's member session ids
//	{p}:h:<group>     hash: partition index → holder session id
//	{p}:k:<group>     hash: member session id → its backend's node id, so
//	                  that a partition's release wakes every member's
//	                  backend (lib/wake_members.lua)
//	{p}:q:<name>      zset: the backends (node ids) whose sessions were
//	                  refused the lease → when, the latest 64; expires
//	                  when nobody has waited for 2 × MaxLease
//	{p}:f:<name>      zset: the backends (node ids) that follow the lease's
//	                  holder (backends.HolderNotifier) → until when (µs of
//	                  Redis time); expires with the latest (lua/follow.lua)
//	{p}:w:<node>      pub/sub channel of one backend: "name session" for
//	                  a lease it waits for that was released, with the
//	                  session that released it (or ended); and the changes
//	                  of the holders it follows (lib/tell.lua)
//
// The meta hash's fields:
//
//	layout, run, guard, token, rev, about   the namespace's (see scripts.go)
//	e:<id>   the session's expiry (µs of Redis time): it is alive while this
//	         is later than Redis's clock; absent once it ended
//	d:<id>   its granted time to live (µs)
//	n:<id>   the number of leases it holds (Digest.Leases); absent: 0
//	r:<id>   its digest's version (Digest.Version), which every acquisition
//	         and release adds one to; absent: 0
//	m:<id>   the revision of its last group leave (part of Digest.Groups)
//	i:<id>   its identity, if it has one
//	l:<name> the lease's holder session id; absent while it is free
//	t:<name> the holder's token
//	v:<name> the value last stored for the lease (it outlives terms)
//	q:<name> present while {p}:q:<name> may have members, so that a
//	         release nobody waits for reads no more than its own fields
//	f:<name> present while {p}:f:<name> may have members, so that a grant
//	         or a release nobody follows reads one field more, no command
//
// A field's tag (its first two characters) says what follows: a session id,
// or a lease name. The namespace's own fields have no ':' second.
const (
	tagMeta     = "meta"
	tagSessions = "sessions"
	tagOwned    = "o:"
	tagJoined   = "j:"
	tagGroup    = "g:"
	tagMembers  = "m:"
	tagHolders  = "h:"
	tagNodes    = "k:"
	tagWaiters  = "q:"
	tagWake     = "w:"
	tagFollow   = "f:"

	fieldExpiry   = "e:"
	fieldTTL      = "d:"
	fieldLeases   = "n:"
	fieldVersion  = "r:"
	fieldLeave    = "m:"
	fieldIdentity = "i:"
	fieldHolder   = "l:"
	fieldToken    = "t:"
	fieldValue    = "v:"
	fieldWaiting  = "q:"
	fieldFollowed = "f:"
)

// layout builds the keys of one namespace.
type layout struct {
	base string // "{prefix}:"
}

func newLayout(prefix string) layout { return layout{base: "{" + prefix + "}:"} }

func (l layout) meta() string            { return l.base + tagMeta }
func (l layout) sessions() string        { return l.base + tagSessions }
func (l layout) owned(id string) string  { return l.base + tagOwned + id }
func (l layout) joined(id string) string { return l.base + tagJoined + id }
func (l layout) group(g string) string   { return l.base + tagGroup + g }
func (l layout) members(g string) string { return l.base + tagMembers + g }
func (l layout) wake(node string) string { return l.base + tagWake + node }
func (l layout) pattern() string         { return l.base + "*" }
func (l layout) String() string          { return strings.TrimSuffix(l.base, ":") }

// field returns the meta hash's field tag+x, x a session id or a lease name.
func field(tag, x string) string { return tag + x }

// The Lua counterpart of layout: the scripts get the namespace's base
// ("{prefix}:") as an argument, P, and build keys and fields inline from the
// tags above, through the placeholders of luaTags (scripts.go).
var luaSessions = helper(luaSource("lib/sessions.lua"))
