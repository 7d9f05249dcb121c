package simbaredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/internal/storeerr"
)

// Every operation is one Lua script, run with EVALSHA (EVAL after a
// NOSCRIPT reply), so that it is one atomic round trip. Every script starts
// with the header below and includes only the helpers it uses (newScript
// adds the helpers they use in turn): the scripts run often — an acquire
// and a release per term — and a prelude of helpers they do not call costs
// Redis time on every call.
//
//   - Every script that needs the time reads Redis's clock (TIME; acquire
//     takes it from INFO, see luaInfoNow): expiry is measured by Redis, never
//     by the client (D1). Redis ≥ 5 replicates a script's effects, not
//     the script, so reading the clock before writing is allowed.
//   - The scripts that grant a lease (acquire) or renew a session (open,
//     keep-alive, owned, and check) check the namespace's meta hash on
//     every call: the layout version (refusing another version,
//     [ErrLayout]) and the run id of the Redis process (the amnesia guard,
//     §15; see check_meta). The others — release, put value, join,
//     leave, members, close — grant nothing, and act only for a live
//     session, which a guarded script opened and renewed.
//
// The renewal scripts (open, keep-alive, owned, members, check) also reap
// sessions that ended, the oldest first, releasing up to reapBudget of their
// leases and memberships per call, so that leases and memberships of
// crashed nodes are released, and watchers woken, within a renewal period
// of any node, and no call blocks Redis for long. Until a dead session is
// reaped, what it holds on record is free: the scripts treat a lease or a
// membership of a session that is not alive as absent.
//
// Then the operation checks that the calling session is alive by Redis's
// clock before it reads or writes anything else, so that a call that reaches
// Redis late can neither extend nor revive a session that expired
// meanwhile, nor touch what another session now holds (S3).
//
// The meta hash {p}:meta holds:
//
//	layout  the layout version (layoutVersion)
//	run     the run id of the Redis process that last checked it
//	guard   no new lease is granted before this instant (µs of Redis time)
//	token   the last token issued (tokens are max(token+1, now in µs))
//	rev     a namespace-wide revision, the source of group epochs
//
// Times are microseconds of Redis time (about 1.8e15 today), tokens are at
// most 2^53-1: both are exact in Lua's doubles. redis.call formats number
// arguments with %.17g, which is exact for them; tostring would round them
// (it uses %.14g), so the scripts never use it, nor string.format, which
// costs more than a redis.call.
//
// The scripts touch keys they do not declare in KEYS (they build them from
// the namespace's base, ARGV[1]); KEYS[1] is the meta hash, which routes the
// call in Redis Cluster. All of them share the hash tag "{prefix}", so they
// live in one slot; scripts without a shebang line may do this.
//
// Arguments: ARGV[1] is the namespace's base ("{prefix}:"), ARGV[2] the
// calling session's id (empty for check); the guarded scripts get MaxLease
// in µs as ARGV[3]. The operation's own arguments follow.
const luaHeader = `
local META, P, SID = KEYS[1], ARGV[1], ARGV[2]
`

// A luaHelper is a piece of Lua that scripts include when they use it — a
// function or a few locals — and the helpers it uses itself.
type luaHelper struct {
	src  string
	uses []*luaHelper
}

func helper(src string, uses ...*luaHelper) *luaHelper { return &luaHelper{src: src, uses: uses} }

// The helpers. The key helpers are in keys.go (luaKey).
var (
	// NOW, Redis's clock in µs. Helpers that use it list luaClock, which
	// newScript resolves to luaNow (TIME) unless the script listed
	// luaInfoNow before.
	luaClock = helper("")

	luaNow = helper(`
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
`)

	luaInfo = helper(`
local INFO = redis.call('INFO', 'server')
`)

	// The acquire script reads INFO anyway (the amnesia guard): its
	// server_time_usec is Redis's clock at the start of the call, which
	// spares a TIME. It may be earlier than TIME (by the script's time so
	// far), never later, and every use acquire makes of NOW is safe with an
	// earlier clock: a holder's expiry looks later (refuse rather than
	// grant), the guard longer, and tokens stay max(last+1, NOW), above the
	// guard's end after a loss. The renewal scripts keep TIME: they send NOW
	// back as the base of a deadline. An older Redis whose INFO lacks
	// server_time_usec: TIME then.
	luaInfoNow = helper(`
local at = string.find(INFO, 'server_time_usec:', 1, true)
local NOW = at and tonumber(string.match(INFO, '^%d+', at + 17))
if not NOW then
  local clock = redis.call('TIME')
  NOW = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end
`, luaInfo)

	luaNextRev = helper(`
local function next_rev() return redis.call('HINCRBY', META, 'rev', 1) end
`)

	// The inverse of backends.PartitionName: "group.i" with i decimal, no
	// leading zero, below 65536.
	luaSplitPartition = helper(`
local function split_partition(name)
  local g, d = string.match(name, '^(.+)%.(%d+)$')
  if not g or (#d > 1 and string.sub(d, 1, 1) == '0') or #d > 5 then return nil end
  local i = tonumber(d)
  if i >= 65536 then return nil end
  return g, i
end
`)

	// Partition i of group g changed holder (holder nil: released): keep
	// the group's holder index, and bump the group's epoch if it has
	// members and i is one of its partitions. Acquire and release get g and
	// i from the client (backends.SplitPartition), sparing Lua the pattern
	// matching.
	luaTouchPart = helper(`
local function touch_part(g, i, holder)
  if holder then
    redis.call('HSET', holders_key(g), i, holder)
  else
    redis.call('HDEL', holders_key(g), i)
  end
  local parts = tonumber(redis.call('HGET', group_key(g), 'parts') or '0')
  if i < parts then redis.call('HSET', group_key(g), 'epoch', next_rev()) end
end
`, luaKeyHolders, luaKeyGroup, luaNextRev)

	// The same, from the lease name.
	luaTouchPartition = helper(`
local function touch_partition(name, holder)
  local g, i = split_partition(name)
  if g then touch_part(g, i, holder) end
end
`, luaSplitPartition, luaTouchPart)

	// leave_group removes session id from group g's members; the caller
	// removes g from the session's groups.
	luaLeaveGroup = helper(`
local function leave_group(id, g)
  redis.call('SREM', members_key(g), id)
  if redis.call('SCARD', members_key(g)) == 0 then
    redis.call('DEL', group_key(g))
  else
    redis.call('HSET', group_key(g), 'epoch', next_rev())
  end
end
`, luaKeyMembers, luaKeyGroup, luaNextRev)

	// The most leases and memberships one call releases of sessions that
	// ended, and the most sessions a renewal reaps.
	luaReapLimits = helper(`
local REAP_BUDGET, REAP_SESSIONS = ` + strconv.Itoa(reapBudget) + `, ` + strconv.Itoa(reapSessions) + `
`)

	// end_session releases what session id holds, waking watchers, ends
	// its memberships, and deletes it, once the session is dead (closed or
	// expired) — but at most budget leases and memberships per call, so
	// that no call blocks Redis for long. It returns the budget left, and
	// whether it finished. A session not finished stays in the sessions
	// set, dead (its expiry is past), and later calls go on: until then,
	// what it still holds on record is free to others (acquire and members
	// check that the holder is alive).
	luaEndSession = helper(`
local function end_session(id, budget)
  local ok, jk = owned_key(id), joined_key(id)
  if budget > 0 then
    local names = redis.call('ZRANGE', ok, 0, budget - 1)
    for _, name in ipairs(names) do
      local lk = lease_key(name)
      if name ~= VERSION and redis.call('HGET', lk, 's') == id then
        redis.call('HDEL', lk, 's', 't') -- the value, if any, stays
        touch_partition(name, nil)
        wake(name, id)
      end
    end
    if #names > 0 then redis.call('ZREMRANGEBYRANK', ok, 0, #names - 1) end
    budget = budget - #names
  end
  if budget > 0 then
    local groups = redis.call('SPOP', jk, budget)
    for _, g in ipairs(groups) do leave_group(id, g) end
    budget = budget - #groups
  end
  if redis.call('EXISTS', ok, jk) > 0 then return budget, false end
  redis.call('DEL', sess_key(id))
  redis.call('ZREM', SESSIONS, id)
  return budget, true
end
`, luaKeyOwned, luaKeyJoined, luaKeyLease, luaTouchPartition, luaWake, luaLeaveGroup, luaKeySession, luaSessions,
		luaVersion)

	// wake tells the backends waiting for lease name that session from
	// released it (or ended): only the WAKE that were refused it last, so
	// that a release costs the same however many nodes wait (the others
	// try on their own schedule, or when their refusal told them the
	// holder's expiry). A lease nobody waits for costs one EXISTS.
	luaWake = helper(`
local WAKE = `+strconv.Itoa(wakePerRelease)+`
local function wake(name, from)
  local qk = waiters_key(name)
  local nodes = redis.call('ZREVRANGE', qk, 0, WAKE - 1)
  if #nodes == 0 then return end
  for _, node in ipairs(nodes) do redis.call('PUBLISH', wake_channel(node), name .. ' ' .. from) end
  redis.call('ZREM', qk, unpack(nodes))
end
`, luaKeyWaiters, luaKeyWake)

	// wait records that node (a backend, "" for none) waits for lease name,
	// for wake: refused it (rank NOW), or only reading its holder (rank
	// NOW − 2^40 µs, so that readers are woken only when fewer candidates
	// wait than a release wakes). The latest 64 are kept, for 2 × maxLease
	// (µs).
	luaWait = helper(`
local function wait(name, node, rank, maxLease)
  if node == '' then return end
  local qk = waiters_key(name)
  redis.call('ZADD', qk, rank, node)
  if redis.call('ZCARD', qk) > 64 then redis.call('ZREMRANGEBYRANK', qk, 0, -65) end
  redis.call('PEXPIRE', qk, math.floor(maxLease / 500))
end
`, luaKeyWaiters)

	// alive reports whether session id is alive by Redis's clock. A dead
	// session is left to the reapers (end_session).
	luaAlive = helper(`
local function alive(id)
  local e = redis.call('ZSCORE', SESSIONS, id)
  return e and tonumber(e) > NOW
end
`, luaSessions, luaClock)

	// The amnesia guard (§15). A Redis process that restarted without
	// its data, reloaded an older snapshot, or is a replica promoted after
	// a fail-over may have forgotten leases that clients still believe they
	// hold. Every guarded script compares the run id of the process it runs
	// in (INFO, read inside the script, so in the same process) with the
	// one recorded in the namespace's meta hash, on every call: the script
	// cache is shared by every namespace of a Redis (the prefix is an
	// argument), and Redis < 7 even saves it with the data, so no reply the
	// client gets tells it reliably that it talks to a new process. On a
	// mismatch, or when the meta hash is missing, nothing in the namespace
	// can be trusted: every session is ended, and no lease is granted until
	// MaxLease has passed since the loss, by when every old holder's local
	// deadline has passed. Reading INFO costs a few µs; only the guarded
	// scripts pay it.
	luaCheckMeta = helper(`
local MAXLEASE = tonumber(ARGV[3])
local GUARD, TOKEN = 0, 0 -- from the meta hash, read by check_meta
local RUN_ID = '?'        -- the run id of this process, from INFO

local function check_meta()
  local m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token')
  if m[1] and m[1] ~= LAYOUT then return {'LAYOUT', m[1]} end
  GUARD, TOKEN = tonumber(m[3] or '0'), tonumber(m[4] or '0')
  local at = string.find(INFO, 'run_id:', 1, true)
  RUN_ID = at and string.match(INFO, '^%x+', at + 7) or '?'
  local run = RUN_ID
  if m[1] and m[2] == run then return nil end
  local guard
  if m[1] or redis.call('ZCARD', SESSIONS) > 0 then
    -- Another process, or a namespace that lost its meta hash only: the
    -- loss happened at the latest now.
    guard = NOW + MAXLEASE
  else
    -- An empty namespace: new, or lost in a restart. A restart happened
    -- at the latest when this process booted, and before now. INFO's
    -- uptime is the difference of two whole seconds, up to a second more
    -- than the time since boot: count a second less.
    local up = tonumber(string.match(INFO, 'uptime_in_seconds:(%d+)') or '0')
    guard = NOW - math.max(0, up - 1) * 1000000 + MAXLEASE
  end
  if GUARD > guard then guard = GUARD end
  GUARD = guard
  -- Every session ends: an expiry of 0 is past, and the reapers release
  -- what they held.
  redis.call('ZUNIONSTORE', SESSIONS, 1, SESSIONS, 'WEIGHTS', 0)
  redis.call('HSET', META, 'layout', LAYOUT, 'run', run, 'guard', guard)
  return nil
end

local bad = check_meta()
if bad then return bad end
`, luaInfo, luaClock, luaSessions, luaLayout)

	// The armed variant of check_meta, for Redis ≥ 7 (see armed.go): the
	// same script with the run id of the Redis process it was loaded into
	// written in as RUN, so that it needs no INFO. It runs only in a process
	// where the guarded check ran first (the arming transaction loads it),
	// and it hands back to the guarded script (ARM) unless the namespace's
	// meta hash still records that process: after a restart, a fail-over,
	// a reload of older data, or a namespace that lost its meta hash.
	luaArmedMeta = helper(`
local MAXLEASE = tonumber(ARGV[3])
local GUARD, TOKEN = 0, 0
do
  local m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token')
  if m[1] ~= LAYOUT then
    if m[1] then return {'LAYOUT', m[1]} end
    return {'ARM'}
  end
  if m[2] ~= RUN then return {'ARM'} end
  GUARD, TOKEN = tonumber(m[3] or '0'), tonumber(m[4] or '0')
end
`, luaClock, luaLayout)

	luaLayout = helper(`
local LAYOUT = '` + layoutVersion + `'
`)

	// The digest's version lives in the session's owned set, as the score
	// of a member that is no lease name (T1 allows no '#'): every
	// acquisition and release adds one to it (backends.Digest), so that a
	// node can follow its own changes from their replies. bump does so and
	// returns the new digest's leases and version.
	luaVersion = helper(`
local VERSION = '` + versionMember + `'
local function bump(ok)
  local v = redis.call('ZINCRBY', ok, 1, VERSION)
  return redis.call('ZCARD', ok) - 1, tonumber(v)
end
`)

	// holder describes the holder of lease record cur (HMGET s t) if it is
	// a live session: its id, token, remaining time (µs) and identity.
	luaHolder = helper(`
local function holder(cur)
  if not cur[1] then return nil end
  local e = redis.call('ZSCORE', SESSIONS, cur[1])
  if not e or tonumber(e) <= NOW then return nil end
  return {cur[1], tonumber(cur[2]), tonumber(e) - NOW, redis.call('HGET', sess_key(cur[1]), 'who') or ''}
end
`, luaSessions, luaClock, luaKeySession)

	// session reads the session hash: ttl, mrev.
	luaSession = helper(`
local function session(id)
  return redis.call('HMGET', sess_key(id), 'ttl', 'mrev')
end
`, luaKeySession)

	// The reply of OpenSession, KeepAlive and Owned: status, remaining
	// (µs), now (µs), and the digest (leases, version, groups), from the
	// session hash s. Its cost grows with the groups joined, never with the
	// leases held (S1).
	luaRenewal = helper(`
local function renewal(id, s, remaining)
  local groups = tonumber(s[2] or '0')
  for _, g in ipairs(redis.call('SMEMBERS', joined_key(id))) do
    local e = tonumber(redis.call('HGET', group_key(g), 'epoch') or '0')
    if e > groups then groups = e end
  end
  local ok = owned_key(id)
  local n, v = redis.call('ZCARD', ok), redis.call('ZSCORE', ok, VERSION)
  if v then n = n - 1 end
  return {'OK', remaining, NOW, n, tonumber(v or '0'), groups}
end
`, luaKeyJoined, luaKeyGroup, luaKeyOwned, luaClock, luaVersion)

	// prune ends the memberships of group g's members that are not alive.
	luaPrune = helper(`
local function prune(g)
  for _, id in ipairs(redis.call('SMEMBERS', members_key(g))) do
    if not alive(id) then
      leave_group(id, g)
      redis.call('SREM', joined_key(id), g)
    end
  end
end
`, luaKeyMembers, luaKeyJoined, luaAlive, luaLeaveGroup)

	// reap ends sessions whose expiry has passed, the oldest first, within
	// one budget. The renewal scripts call it, so that leases and
	// memberships of crashed nodes are released within one renewal period
	// of any node (or a few, for a crashed node that held more than the
	// budget).
	luaReap = helper(`
local function reap()
  local budget, done = REAP_BUDGET, true
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', SESSIONS, '-inf', NOW, 'LIMIT', 0, REAP_SESSIONS)) do
    budget, done = end_session(id, budget)
    if not done then return end
  end
end
`, luaSessions, luaClock, luaReapLimits, luaEndSession)
)

// versionMember is the member of a session's owned set whose score is the
// digest's version (see luaVersion).
const versionMember = "#"

// Reaping limits: a call releases at most reapBudget leases and memberships
// of sessions that ended (releasing 1,000 leases took about 3 ms of Redis
// time on the test machine), and a renewal reaps at most reapSessions
// sessions.
const (
	reapBudget   = 1000
	reapSessions = 16
)

// ownedPage is how many entries of a session's owned set one call of Owned
// reads: reading 5,000 takes Redis about a millisecond, so that Owned of a
// session holding a million leases blocks Redis for no longer than that at a
// time. Tests make it smaller.
var ownedPage = 5000

// wakePerRelease is how many of the backends waiting for a lease a release
// wakes (luaWake): a few, so that one that died meanwhile does not leave the
// lease idle, and not all, so that a release costs Redis the same for 10 or
// 10,000 waiting nodes.
const wakePerRelease = 2

// The operations, in two groups: those with the amnesia guard
// (luaCheckMeta, ARGV[3] is MaxLease, their own arguments start at
// ARGV[4]) and the others (their own arguments start at ARGV[3]).
var (
	// ARGV[4]: the granted time to live in µs; ARGV[5]: the identity.
	// Idempotent, so that a retry of a call whose reply was lost does no
	// harm.
	scriptOpen = newScript("open", `
reap()
if redis.call('ZSCORE', SESSIONS, SID) then
  if not alive(SID) then return {'EXPIRED'} end
else
  redis.call('HSET', sess_key(SID), 'ttl', ARGV[4], 'mrev', 0, 'who', ARGV[5])
end
local s = session(SID)
local ttl = tonumber(s[1])
redis.call('ZADD', SESSIONS, NOW + ttl, SID)
return renewal(SID, s, ttl)
`, luaCheckMeta, luaReap, luaAlive, luaKeySession, luaSession, luaRenewal)

	scriptKeepAlive = newScript("keep-alive", `
reap()
if not alive(SID) then return {'EXPIRED'} end
local s = session(SID)
local ttl = tonumber(s[1])
redis.call('ZADD', SESSIONS, NOW + ttl, SID)
return renewal(SID, s, ttl)
`, luaCheckMeta, luaReap, luaAlive, luaSession, luaRenewal)

	// ARGV[4], ARGV[5]: the first rank and the number of entries of the
	// page to read. Reply: as keep-alive's, then the page (name, token, …;
	// the version member included).
	scriptOwned = newScript("owned", `
reap()
if not alive(SID) then return {'EXPIRED'} end
local r = renewal(SID, session(SID), 0)
local first = tonumber(ARGV[4])
r[7] = redis.call('ZRANGE', owned_key(SID), first, first + tonumber(ARGV[5]) - 1, 'WITHSCORES')
return r
`, luaCheckMeta, luaReap, luaAlive, luaSession, luaRenewal, luaKeyOwned)

	// ARGV[4]: the lease name; ARGV[5]: the node id of the backend, which a
	// release wakes if it is refused (luaWait); ARGV[6] and ARGV[7], for a
	// partition: its group and index. Reply: OK, the token, the digest's
	// leases and version, and the value if there is one; or HELD and the
	// holder (see luaHolder).
	scriptAcquire = newScript("acquire", `
if not alive(SID) then return {'EXPIRED'} end
local name = ARGV[4]
local lk = lease_key(name)
local cur = redis.call('HMGET', lk, 's', 't', 'v')
local tok, ok = cur[2], owned_key(SID)
local n, v
if cur[1] ~= SID then
  local h = holder(cur)
  if h then
    wait(name, ARGV[5], NOW, MAXLEASE)
    return {'HELD', h[1], h[2], h[3], h[4]}
  end
  if NOW < GUARD then
    wait(name, ARGV[5], NOW, MAXLEASE)
    return {'RECOVERING', GUARD - NOW}
  end
  tok = math.max(TOKEN + 1, NOW)
  if tok > 9007199254740991 then return {'TOKENS'} end -- 2^53-1
  redis.call('HSET', META, 'token', tok)
  redis.call('HSET', lk, 's', SID, 't', tok)
  redis.call('ZADD', ok, tok, name)
  n, v = bump(ok)
  if ARGV[6] then touch_part(ARGV[6], tonumber(ARGV[7]), SID) end
else
  n = redis.call('ZCARD', ok) - 1
  v = tonumber(redis.call('ZSCORE', ok, VERSION))
end
return {'OK', tok, n, v, cur[3]}
`, luaInfoNow, luaCheckMeta, luaAlive, luaHolder, luaWait, luaKeyLease, luaKeyOwned, luaVersion, luaTouchPart)

	// The header and check_meta: checks the layout and the run id, reaps.
	// Reply: OK, the run id of the process, and its major version.
	scriptCheck = newScript("check", `
reap()
return {'OK', RUN_ID, tonumber(string.match(INFO, 'redis_version:(%d+)') or '0')}
`, luaCheckMeta, luaReap)
)

var (
	// ARGV[3]: the lease name; ARGV[4]: the token; ARGV[5] and ARGV[6],
	// for a partition: its group and index. Reply: OK and the digest's
	// leases and version.
	scriptRelease = newScript("release", `
if not alive(SID) then return {'EXPIRED'} end
local name = ARGV[3]
local lk = lease_key(name)
local cur = redis.call('HMGET', lk, 's', 't')
local ok = owned_key(SID)
if cur[1] == SID and cur[2] == ARGV[4] then
  redis.call('HDEL', lk, 's', 't') -- the value, if any, stays
  redis.call('ZREM', ok, name)
  local n, v = bump(ok)
  if ARGV[5] then touch_part(ARGV[5], tonumber(ARGV[6])) end
  wake(name, SID)
  return {'OK', n, v}
end
local v = redis.call('ZSCORE', ok, VERSION)
local n = redis.call('ZCARD', ok)
if v then n = n - 1 end
return {'OK', n, tonumber(v or '0')}
`, luaAlive, luaKeyLease, luaKeyOwned, luaVersion, luaTouchPart, luaWake)

	// ARGV[3]: the lease name; ARGV[4]: the node id of the backend, which
	// the next release wakes if few candidates wait (luaWait); ARGV[5]:
	// MaxLease in µs. Reply: OK and the holder (see luaHolder), or OK alone
	// if the lease is free.
	scriptHolder = newScript("holder", `
if not alive(SID) then return {'EXPIRED'} end
local name = ARGV[3]
local h = holder(redis.call('HMGET', lease_key(name), 's', 't'))
if h then
  wait(name, ARGV[4], NOW - 1099511627776, tonumber(ARGV[5]))
  return {'OK', h[1], h[2], h[3], h[4]}
end
return {'OK'}
`, luaAlive, luaHolder, luaWait, luaKeyLease)

	// ARGV[3]: the lease name; ARGV[4]: the token; ARGV[5]: the value.
	scriptPutValue = newScript("put value", `
if not alive(SID) then return {'EXPIRED'} end
local lk = lease_key(ARGV[3])
local cur = redis.call('HMGET', lk, 's', 't')
if cur[1] ~= SID or cur[2] ~= ARGV[4] then return {'NOTHOLDER'} end
redis.call('HSET', lk, 'v', ARGV[5])
return {'OK'}
`, luaAlive, luaKeyLease)

	// ARGV[3]: the group; ARGV[4]: its partition count.
	scriptJoin = newScript("join", `
if not alive(SID) then return {'EXPIRED'} end
local g, n = ARGV[3], ARGV[4]
prune(g)
local parts = redis.call('HGET', group_key(g), 'parts')
if parts and parts ~= n then return {'MISMATCH', tonumber(parts)} end
if redis.call('SISMEMBER', members_key(g), SID) == 1 then return {'OK'} end
redis.call('SADD', members_key(g), SID)
redis.call('SADD', joined_key(SID), g)
redis.call('HSET', group_key(g), 'parts', n, 'epoch', next_rev())
return {'OK'}
`, luaAlive, luaPrune, luaKeyGroup, luaKeyMembers, luaKeyJoined, luaNextRev)

	// ARGV[3]: the group.
	scriptLeave = newScript("leave", `
if not alive(SID) then return {'EXPIRED'} end
local g = ARGV[3]
redis.call('SREM', joined_key(SID), g)
if redis.call('SISMEMBER', members_key(g), SID) == 1 then
  leave_group(SID, g)
  redis.call('HSET', sess_key(SID), 'mrev', next_rev())
end
return {'OK'}
`, luaAlive, luaKeyJoined, luaKeyMembers, luaLeaveGroup, luaKeySession, luaNextRev)

	// ARGV[3]: the group. Reply: OK, partitions, members, holders as a flat
	// list of partition index and session id.
	scriptMembers = newScript("members", `
reap()
if not alive(SID) then return {'EXPIRED'} end
local g = ARGV[3]
prune(g)
local parts = tonumber(redis.call('HGET', group_key(g), 'parts') or '0')
if parts == 0 then return {'OK', 0, {}, {}} end
local holders = {}
local h = redis.call('HGETALL', holders_key(g))
for i = 1, #h, 2 do
  if tonumber(h[i]) < parts and alive(h[i + 1]) then
    holders[#holders + 1] = h[i]
    holders[#holders + 1] = h[i + 1]
  end
end
return {'OK', parts, redis.call('SMEMBERS', members_key(g)), holders}
`, luaReap, luaAlive, luaPrune, luaKeyGroup, luaKeyHolders, luaKeyMembers)

	// Ends the session at once, and releases what it holds within one
	// budget; MORE: call again to go on.
	scriptClose = newScript("close", `
local e = redis.call('ZSCORE', SESSIONS, SID)
if not e then return {'OK'} end
if tonumber(e) > 0 then redis.call('ZADD', SESSIONS, 0, SID) end
local _, done = end_session(SID, REAP_BUDGET)
if not done then return {'MORE'} end
return {'OK'}
`, luaSessions, luaReapLimits, luaEndSession)
)

// script is one operation's Lua source, helpers included, and its SHA1.
type script struct {
	name    string
	src     string
	sha     string
	guarded bool // it runs check_meta, and takes MaxLease as ARGV[3]

	// armed is the source of the armed variant of a guarded script, with
	// runPlaceholder where the run id goes (see armed.go).
	armed string
}

// runPlaceholder stands for the run id in an armed script's source.
const runPlaceholder = "__RUN__"

// newScript assembles a script: the header, the helpers it uses and those
// they use, each once and after those it uses, then body. A guarded script
// (one that uses luaCheckMeta) also gets its armed variant: luaArmedMeta in
// place of luaCheckMeta, and the clock from TIME rather than INFO.
func newScript(name, body string, uses ...*luaHelper) *script {
	src, guarded := assemble(body, uses, nil)
	sum := sha1.Sum([]byte(src))
	sc := &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), guarded: guarded}
	if guarded {
		armed, _ := assemble(body, uses, map[*luaHelper]*luaHelper{luaCheckMeta: luaArmedMeta, luaInfoNow: nil})
		sc.armed = luaHeader + "local RUN = '" + runPlaceholder + "'\n" + strings.TrimPrefix(armed, luaHeader)
	}
	return sc
}

// assemble builds a script's source from body and the helpers it uses,
// replacing helpers as swap says (nil: leave it out). It reports whether the
// script runs check_meta.
func assemble(body string, uses []*luaHelper, swap map[*luaHelper]*luaHelper) (string, bool) {
	var src strings.Builder
	src.WriteString(luaHeader)
	done := make(map[*luaHelper]bool)
	var add func(h *luaHelper)
	add = func(h *luaHelper) {
		if r, ok := swap[h]; ok {
			if r == nil {
				return
			}
			h = r
		}
		if done[h] {
			return
		}
		done[h] = true
		if h == luaClock && !done[luaInfoNow] {
			add(luaNow)
		}
		for _, u := range h.uses {
			add(u)
		}
		src.WriteString(h.src)
	}
	for _, h := range uses {
		add(h)
	}
	src.WriteString(body)
	return src.String(), done[luaCheckMeta]
}

// reply is a script's answer: a status and the operation's values.
type reply []any

func (r reply) status() string {
	if len(r) == 0 {
		return ""
	}
	s, _ := r[0].(string)
	return s
}

// int returns element i as an integer (0 if it is missing or not one).
func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	switch v := r[i].(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	s, _ := r[i].(string)
	return s
}

func (r reply) list(i int) []any {
	if i >= len(r) {
		return nil
	}
	l, _ := r[i].([]any)
	return l
}

// run runs sc for session sid (or "") with the operation's arguments, as one
// round trip: EVALSHA, and EVAL after NOSCRIPT (a Redis process that never
// ran the script). It maps the statuses every script can return (LAYOUT,
// EXPIRED, TOKENS) and driver errors to errors; other statuses are the
// caller's. sid is a string in an interface, made once per session, as are
// the backend's own arguments: these calls are hot, and a string stored in
// an interface costs an allocation each time.
func (b *Backend) run(ctx context.Context, sc *script, what string, sid any, args ...any) (reply, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("simbaredis: %s: %w", what, backends.ErrClosed)
	}
	argv := make([]any, 0, 3+len(args))
	argv = append(argv, b.baseArg, sid)
	if sc.guarded {
		argv = append(argv, b.maxLeaseArg)
	}
	argv = append(argv, args...)
	var (
		res   any
		err   error
		armed bool
	)
	if sc.guarded && sc != scriptCheck {
		res, armed, err = b.runArmed(ctx, sc, argv)
	}
	if !armed {
		res, err = b.client.EvalSha(ctx, sc.sha, b.metaKeys, argv...).Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = b.client.Eval(ctx, sc.src, b.metaKeys, argv...).Result()
		}
	}
	if err != nil {
		return nil, b.unavailable(ctx, what, err)
	}
	r, ok := res.([]any)
	if !ok || reply(r).status() == "" {
		return nil, fmt.Errorf("simbaredis: %s: unexpected reply %v from the %s script: %w",
			what, res, sc.name, backends.ErrUnavailable)
	}
	rep := reply(r)
	switch rep.status() {
	case "LAYOUT":
		return nil, fmt.Errorf("simbaredis: %s: namespace %s has key layout version %s, this package uses %s: %w",
			what, b.keys, rep.str(1), layoutVersion, ErrLayout)
	case "EXPIRED":
		return nil, fmt.Errorf("simbaredis: %s: session %s: %w", what, sid, backends.ErrSessionExpired)
	case "TOKENS":
		return nil, fmt.Errorf("simbaredis: %s: the token counter of namespace %s reached 2^53, the largest token Lua can hold", what, b.keys)
	}
	return rep, nil
}

// unavailable wraps a driver error, which means the store could not be
// reached, did not answer in time, or refused to serve (an error reply).
func (b *Backend) unavailable(ctx context.Context, what string, err error) error {
	return storeerr.Unavailable(ctx, "simbaredis", what, err)
}

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func storeTime(us int64) time.Time { return time.UnixMicro(us).UTC() }
