package simbaredis

import "strings"

// layoutVersion is the version of the key layout and of the scripts that
// read and write it. It is stored in the namespace's meta hash; a script that
// finds another version refuses to run ([ErrLayout]), so that two versions of
// this package never share a namespace silently.
const layoutVersion = "4"

// The key layout of a namespace, defined here and nowhere else: the Go side
// builds keys with [layout], and the Lua helpers below get the same
// tags from these constants. Every key starts with the hash tag "{prefix}",
// so that a namespace lives in one Redis Cluster slot.
//
//	{p}:meta          hash: layout, run, guard, token, rev (see scripts.go)
//	{p}:sessions      zset: session id → expiry (µs of Redis time)
//	{p}:s:<id>        hash: ttl (µs), mrev (last leave), who (identity)
//	{p}:o:<id>        zset: lease name → token, the leases the session holds,
//	                  and "#" → Digest.Version (versionMember), which
//	                  every acquisition and release adds one to
//	{p}:j:<id>        set: the groups the session joined
//	{p}:l:<name>      hash: s (holder session id), t (token), v (value);
//	                  a release deletes s and t: the value outlives terms
//	{p}:g:<group>     hash: parts, epoch; exists while the group has members
//	{p}:m:<group>     set: the group's member session ids
//	{p}:h:<group>     hash: partition index → holder session id
//	{p}:q:<name>      zset: the backends (node ids) whose sessions were
//	                  refused the lease → when, the latest 64; expires
//	                  when nobody has waited for 2 × MaxLease
//	{p}:w:<node>      pub/sub channel of one backend: "name session" for
//	                  a lease it waits for that was released, with the
//	                  session that released it (or ended)
const (
	tagMeta     = "meta"
	tagSessions = "sessions"
	tagSession  = "s:"
	tagOwned    = "o:"
	tagJoined   = "j:"
	tagLease    = "l:"
	tagGroup    = "g:"
	tagMembers  = "m:"
	tagHolders  = "h:"
	tagWaiters  = "q:"
	tagWake     = "w:"
)

// layout builds the keys of one namespace.
type layout struct {
	base string // "{prefix}:"
}

func newLayout(prefix string) layout { return layout{base: "{" + prefix + "}:"} }

func (l layout) meta() string             { return l.base + tagMeta }
func (l layout) sessions() string         { return l.base + tagSessions }
func (l layout) session(id string) string { return l.base + tagSession + id }
func (l layout) wake(node string) string  { return l.base + tagWake + node }
func (l layout) pattern() string          { return l.base + "*" }
func (l layout) String() string           { return strings.TrimSuffix(l.base, ":") }

// The Lua counterpart of layout: the scripts get the namespace's base
// ("{prefix}:") as an argument, P, and build keys with these helpers.
var (
	luaSessions   = helper("local SESSIONS = P .. '" + tagSessions + "'\n")
	luaKeyWaiters = luaKey("waiters_key", tagWaiters)
	luaKeyWake    = luaKey("wake_channel", tagWake)
	luaKeySession = luaKey("sess_key", tagSession)
	luaKeyOwned   = luaKey("owned_key", tagOwned)
	luaKeyJoined  = luaKey("joined_key", tagJoined)
	luaKeyLease   = luaKey("lease_key", tagLease)
	luaKeyGroup   = luaKey("group_key", tagGroup)
	luaKeyMembers = luaKey("members_key", tagMembers)
	luaKeyHolders = luaKey("holders_key", tagHolders)
)

func luaKey(name, tag string) *luaHelper {
	return helper("local function " + name + "(x) return P .. '" + tag + "' .. x end\n")
}
