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
// What a script costs Redis is mostly the commands it calls: on the test
// machine, one redis.call costs about 1 to 3 µs (the command, and the
// conversion of its arguments and reply), an empty script about 2.5 µs.
// So the state that the hot scripts read and write together lives in one
// hash, the meta hash (see keys.go): an acquire reads the token counter, the
// guard, the calling session's expiry and digest and the lease's record in
// one HMGET, and writes the counter, the record and the digest in one HSET;
// a release reads in one HMGET too. Each check below costs a field of that
// HMGET, not a command of its own (doc.go lists what each costs).
//
//   - Every script that needs the time reads Redis's clock (TIME; acquire
//     takes it from INFO when it reads INFO anyway, see luaInfoNow): expiry
//     is measured by Redis, never by the client (D1). Redis ≥ 5 replicates
//     a script's effects, not the script, so reading the clock before
//     writing is allowed.
//   - The scripts that grant a lease (acquire) or renew a session (open,
//     keep-alive, owned, and check) check the namespace's meta hash on
//     every call: the layout version (refusing another version,
//     [ErrLayout]) and the run id of the Redis process (the amnesia guard,
//     §15; see check_meta). The others — release, holder, put value, join,
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
// clock before it decides or writes anything else (it may have read the
// session's expiry in the same command as the fields it needs next), so that
// a call that reaches Redis late can neither extend nor revive a session
// that expired meanwhile, nor touch what another session now holds (S3).
//
// A session is alive while the e:<id> field of the meta hash is later than
// Redis's clock. The sessions sorted set holds the same expiry, as the order
// in which the reapers end sessions; set_expiry and end_now write both, and
// nothing else writes either.
//
// The meta hash's own fields:
//
//	layout  the layout version (layoutVersion)
//	run     the run id of the Redis process that last checked it
//	guard   no new lease is granted before this instant (µs of Redis time)
//	token   the last token issued (tokens are max(token+1, now in µs))
//	rev     a namespace-wide revision, the source of group epochs
//	about   what the namespace is, for people (metaAbout)
//
// Times are microseconds of Redis time (about 1.8e15 today), tokens are at
// most 2^53-1: both are exact in Lua's doubles. redis.call formats number
// arguments with %.17g, which is exact for them; tostring would round them
// (it uses %.14g), so the scripts never use it.
//
// The scripts touch keys they do not declare in KEYS (they build them from
// the namespace's base, ARGV[1]); KEYS[1] is the meta hash, which routes the
// call in Redis Cluster. All of them share the hash tag "{prefix}", so they
// live in one slot; scripts without a shebang line may do this.
//
// Arguments: ARGV[1] is the namespace's base ("{prefix}:"), ARGV[2] the
// calling session's id (empty for check); the guarded scripts get MaxLease
// in µs as ARGV[3]. The operation's own arguments follow.
//
// In the Lua sources, $NAME stands for a tag of keys.go (luaTags): '$EXPIRY'
// .. id is the field e:<id>.
const luaHeader = `
local META, P, SID = KEYS[1], ARGV[1], ARGV[2]
`

// luaTags replaces the $NAME placeholders of the Lua sources with the tags of
// keys.go.
var luaTags = strings.NewReplacer(
	"$EXPIRY", fieldExpiry,
	"$TTL", fieldTTL,
	"$LEASES", fieldLeases,
	"$VERSION", fieldVersion,
	"$LEAVE", fieldLeave,
	"$IDENTITY", fieldIdentity,
	"$HOLDER", fieldHolder,
	"$TOKEN", fieldToken,
	"$VALUE", fieldValue,
	"$WAITING", fieldWaiting,
	"$OWNED", tagOwned,
	"$JOINED", tagJoined,
	"$GROUP", tagGroup,
	"$MEMBERS", tagMembers,
	"$PARTHOLDERS", tagHolders,
	"$WAITERS", tagWaiters,
	"$WAKE", tagWake,
)

// A luaHelper is a piece of Lua that scripts include when they use it — a
// function or a few locals — and the helpers it uses itself.
type luaHelper struct {
	src  string
	uses []*luaHelper
}

func helper(src string, uses ...*luaHelper) *luaHelper { return &luaHelper{src: src, uses: uses} }

// The helpers. They build keys inline, P .. '$OWNED' .. id: a function
// per key would cost a closure per call.
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

	// The guarded acquire reads INFO anyway (the amnesia guard): its
	// server_time_usec is Redis's clock at the start of the call, which
	// spares a TIME. It may be earlier than TIME (by the script's time so
	// far), never later, and every use acquire makes of NOW is safe with an
	// earlier clock: a holder's expiry looks later (refuse rather than
	// grant), the guard longer, and tokens stay max(last+1, NOW), above the
	// guard's end after a loss. The renewal scripts keep TIME: they send NOW
	// back as the base of a deadline. An older Redis whose INFO lacks
	// server_time_usec: TIME then. (The armed acquire reads no INFO, and
	// TIME.)
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
    redis.call('HSET', P .. '$PARTHOLDERS' .. g, i, holder)
  else
    redis.call('HDEL', P .. '$PARTHOLDERS' .. g, i)
  end
  local parts = tonumber(redis.call('HGET', P .. '$GROUP' .. g, 'parts') or '0')
  if i < parts then redis.call('HSET', P .. '$GROUP' .. g, 'epoch', next_rev()) end
end
`, luaNextRev)

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
  redis.call('SREM', P .. '$MEMBERS' .. g, id)
  if redis.call('SCARD', P .. '$MEMBERS' .. g) == 0 then
    redis.call('DEL', P .. '$GROUP' .. g)
  else
    redis.call('HSET', P .. '$GROUP' .. g, 'epoch', next_rev())
  end
end
`, luaNextRev)

	// The most leases and memberships one call releases of sessions that
	// ended, and the most sessions a renewal reaps.
	luaReapLimits = helper(`
local REAP_BUDGET, REAP_SESSIONS = ` + strconv.Itoa(reapBudget) + `, ` + strconv.Itoa(reapSessions) + `
`)

	// set_expiry makes session id expire at e (µs of Redis time); end_now
	// ends it at once. They write the session's expiry in both places: its
	// e: field, which says whether it is alive, and the sessions set, which
	// orders the reaping.
	luaSetExpiry = helper(`
local function set_expiry(id, e)
  redis.call('ZADD', SESSIONS, e, id)
  redis.call('HSET', META, '$EXPIRY' .. id, e)
end
local function end_now(id)
  redis.call('ZADD', SESSIONS, 0, id)
  redis.call('HDEL', META, '$EXPIRY' .. id)
end
`, luaSessions)

	// end_session releases what session id holds, waking watchers, ends
	// its memberships, and deletes it, once the session is dead (closed or
	// expired) — but at most budget leases and memberships per call, so
	// that no call blocks Redis for long. It returns the budget left, and
	// whether it finished. A session not finished stays in the sessions
	// set, dead (its expiry is past), and later calls go on: until then,
	// what it still holds on record is free to others (acquire and members
	// check that the holder is alive). The lease records of a page are read
	// in one HMGET and deleted in one HDEL.
	luaEndSession = helper(`
local function end_session(id, budget)
  local ok, jk = P .. '$OWNED' .. id, P .. '$JOINED' .. id
  if budget > 0 then
    local names = redis.call('ZRANGE', ok, 0, budget - 1)
    if #names > 0 then
      local fields = {}
      for i, name in ipairs(names) do
        fields[2 * i - 1], fields[2 * i] = '$HOLDER' .. name, '$WAITING' .. name
      end
      local recs = redis.call('HMGET', META, unpack(fields))
      local free = {}
      for i, name in ipairs(names) do
        if recs[2 * i - 1] == id then
          free[#free + 1], free[#free + 2] = '$HOLDER' .. name, '$TOKEN' .. name
          touch_partition(name, nil)
          if recs[2 * i] then wake(name, id) end
        end
      end
      if #free > 0 then redis.call('HDEL', META, unpack(free)) end -- values, if any, stay
      redis.call('ZREMRANGEBYRANK', ok, 0, #names - 1)
      budget = budget - #names
    end
  end
  if budget > 0 then
    local groups = redis.call('SPOP', jk, budget)
    for _, g in ipairs(groups) do leave_group(id, g) end
    budget = budget - #groups
  end
  if redis.call('EXISTS', ok, jk) > 0 then return budget, false end
  redis.call('HDEL', META, '$EXPIRY' .. id, '$TTL' .. id, '$LEASES' .. id, '$VERSION' .. id, '$LEAVE' .. id,
    '$IDENTITY' .. id)
  redis.call('ZREM', SESSIONS, id)
  return budget, true
end
`, luaTouchPartition, luaWake, luaLeaveGroup, luaSessions)

	// wake tells the backends waiting for lease name that session from
	// released it (or ended): only the WAKE that were refused it last, so
	// that a release costs the same however many nodes wait (the others
	// try on their own schedule, or when their refusal told them the
	// holder's expiry). Its callers call it only if the lease's q: field
	// says someone may wait, so that a lease nobody waits for costs no
	// command; it deletes that field once the waiters' set is empty.
	luaWake = helper(`
local WAKE = ` + strconv.Itoa(wakePerRelease) + `
local function wake(name, from)
  local qk = P .. '$WAITERS' .. name
  local nodes = redis.call('ZREVRANGE', qk, 0, WAKE - 1)
  for _, node in ipairs(nodes) do redis.call('PUBLISH', P .. '$WAKE' .. node, name .. ' ' .. from) end
  if #nodes > 0 then redis.call('ZREM', qk, unpack(nodes)) end
  if #nodes < WAKE then redis.call('HDEL', META, '$WAITING' .. name) end
end
`)

	// wait records that node (a backend, "" for none) waits for lease name,
	// for wake: refused it (rank NOW), or only reading its holder (rank
	// NOW − 2^40 µs, so that readers are woken only when fewer candidates
	// wait than a release wakes). The latest 64 are kept, for 2 × maxLease
	// (µs). It sets the lease's q: field unless flagged says it is set
	// (acquire does not read it: it would cost every grant a field).
	luaWait = helper(`
local function wait(name, node, rank, maxLease, flagged)
  if node == '' then return end
  local qk = P .. '$WAITERS' .. name
  redis.call('ZADD', qk, rank, node)
  if redis.call('ZCARD', qk) > 64 then redis.call('ZREMRANGEBYRANK', qk, 0, -65) end
  redis.call('PEXPIRE', qk, math.floor(maxLease / 500))
  if not flagged then redis.call('HSET', META, '$WAITING' .. name, 1) end
end
`)

	// alive reports whether session id is alive by Redis's clock. A dead
	// session is left to the reapers (end_session). The hot scripts read
	// the e: field with their other fields instead.
	luaAlive = helper(`
local function alive(id)
  local e = redis.call('HGET', META, '$EXPIRY' .. id)
  return e and tonumber(e) > NOW
end
`, luaClock)

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
	// scripts pay it, and on Redis ≥ 7 their armed variants do not (see
	// luaArmedMeta).
	//
	// check_meta(...) reads the meta hash's layout, run, guard and token,
	// and the script's own fields (...) after them in the same HMGET. It
	// returns an error reply, or nil and the fields read (m[5] is the
	// first of the script's own), read again after a loss ended every
	// session.
	luaCheckMeta = helper(`
local MAXLEASE = tonumber(ARGV[3])
local GUARD, TOKEN = 0, 0 -- from the meta hash, read by check_meta
local RUN_ID = '?'        -- the run id of this process, from INFO

local function lost(m)
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
  local old = tonumber(m[3] or '0')
  if old > guard then guard = old end
  -- Every session ends: an expiry of 0 is past, and the reapers release
  -- what they held.
  redis.call('ZUNIONSTORE', SESSIONS, 1, SESSIONS, 'WEIGHTS', 0)
  local ids = redis.call('ZRANGE', SESSIONS, 0, -1)
  for i = 1, #ids, 1000 do
    local f = {}
    for j = i, math.min(i + 999, #ids) do f[#f + 1] = '$EXPIRY' .. ids[j] end
    redis.call('HDEL', META, unpack(f))
  end
  redis.call('HSET', META, 'layout', LAYOUT, 'run', RUN_ID, 'guard', guard, 'about', ABOUT)
end

local function check_meta(...)
  local m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token', ...)
  if m[1] and m[1] ~= LAYOUT then return {'LAYOUT', m[1]} end
  local at = string.find(INFO, 'run_id:', 1, true)
  RUN_ID = at and string.match(INFO, '^%x+', at + 7) or '?'
  if not (m[1] and m[2] == RUN_ID) then
    lost(m)
    m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token', ...)
  end
  GUARD, TOKEN = tonumber(m[3] or '0'), tonumber(m[4] or '0')
  return nil, m
end
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

local function check_meta(...)
  local m = redis.call('HMGET', META, 'layout', 'run', 'guard', 'token', ...)
  if m[1] ~= LAYOUT then
    if m[1] then return {'LAYOUT', m[1]} end
    return {'ARM'}
  end
  if m[2] ~= RUN then return {'ARM'} end
  GUARD, TOKEN = tonumber(m[3] or '0'), tonumber(m[4] or '0')
  return nil, m
end
`, luaClock, luaLayout)

	luaLayout = helper(`
local LAYOUT, ABOUT = '` + layoutVersion + `', '` + metaAbout + `'
`)

	// holder describes session id, the holder on record of a lease with
	// token tok, if it is alive: its id, token, remaining time (µs) and
	// identity.
	luaHolder = helper(`
local function holder(id, tok)
  local s = redis.call('HMGET', META, '$EXPIRY' .. id, '$IDENTITY' .. id)
  local e = tonumber(s[1] or '0')
  if e <= NOW then return nil end
  return {id, tonumber(tok), e - NOW, s[2] or ''}
end
`, luaClock)

	// The reply of OpenSession, KeepAlive and Owned: status, remaining
	// (µs), now (µs), and the digest: leases n and version v (the
	// session's n: and r: fields), and groups, from mrev (its m: field) and
	// the epochs of the groups it joined. Its cost grows with the groups
	// joined, never with the leases held (S1).
	luaRenewal = helper(`
local function renewal(id, remaining, n, v, mrev)
  local groups = tonumber(mrev or '0')
  for _, g in ipairs(redis.call('SMEMBERS', P .. '$JOINED' .. id)) do
    local e = tonumber(redis.call('HGET', P .. '$GROUP' .. g, 'epoch') or '0')
    if e > groups then groups = e end
  end
  return {'OK', remaining, NOW, tonumber(n or '0'), tonumber(v or '0'), groups}
end
`, luaClock)

	// prune ends the memberships of group g's members that are not alive.
	luaPrune = helper(`
local function prune(g)
  for _, id in ipairs(redis.call('SMEMBERS', P .. '$MEMBERS' .. g)) do
    if not alive(id) then
      leave_group(id, g)
      redis.call('SREM', P .. '$JOINED' .. id, g)
    end
  end
end
`, luaAlive, luaLeaveGroup)

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
	// harm; the session's place in the sessions set is read before reap,
	// which could delete a session that expired, so that a late retry
	// cannot open a session anew.
	scriptOpen = newScript("open", `
local bad, m = check_meta('$EXPIRY' .. SID, '$TTL' .. SID, '$LEASES' .. SID, '$VERSION' .. SID, '$LEAVE' .. SID)
if bad then return bad end
local known = redis.call('ZSCORE', SESSIONS, SID)
reap()
local ttl
if known then
  if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
  ttl = tonumber(m[6])
else
  ttl = tonumber(ARGV[4])
  if ARGV[5] == '' then
    redis.call('HSET', META, '$TTL' .. SID, ARGV[4])
  else
    redis.call('HSET', META, '$TTL' .. SID, ARGV[4], '$IDENTITY' .. SID, ARGV[5])
  end
end
set_expiry(SID, NOW + ttl)
return renewal(SID, ttl, m[7], m[8], m[9])
`, luaCheckMeta, luaReap, luaSetExpiry, luaRenewal)

	scriptKeepAlive = newScript("keep-alive", `
local bad, m = check_meta('$EXPIRY' .. SID, '$TTL' .. SID, '$LEASES' .. SID, '$VERSION' .. SID, '$LEAVE' .. SID)
if bad then return bad end
reap()
if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
local ttl = tonumber(m[6])
set_expiry(SID, NOW + ttl)
return renewal(SID, ttl, m[7], m[8], m[9])
`, luaCheckMeta, luaReap, luaSetExpiry, luaRenewal)

	// ARGV[4], ARGV[5]: the first rank and the number of entries of the
	// page to read. Reply: as keep-alive's, then the page (name, token, …).
	scriptOwned = newScript("owned", `
local bad, m = check_meta('$EXPIRY' .. SID, '$LEASES' .. SID, '$VERSION' .. SID, '$LEAVE' .. SID)
if bad then return bad end
reap()
if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
local r = renewal(SID, 0, m[6], m[7], m[8])
local first = tonumber(ARGV[4])
r[7] = redis.call('ZRANGE', P .. '$OWNED' .. SID, first, first + tonumber(ARGV[5]) - 1, 'WITHSCORES')
return r
`, luaCheckMeta, luaReap, luaRenewal)

	// ARGV[4]: the lease name; ARGV[5]: the node id of the backend, which a
	// release wakes if it is refused (luaWait); ARGV[6] and ARGV[7], for a
	// partition: its group and index. Reply: OK, the token, the digest's
	// leases and version, and the value if there is one; or HELD and the
	// holder (see luaHolder).
	//
	// Granting a free lease takes four commands: the clock, one HMGET (the
	// guard's fields, the session's expiry and digest, the lease's record
	// and value), one HSET (the token counter, the record, the digest) and
	// one ZADD (the session's owned set, which Owned and the reapers read).
	// Numbers it writes are formatted once, with string.format('%d'):
	// redis.call would format each with %.17g, which costs more.
	scriptAcquire = newScript("acquire", `
local name = ARGV[4]
local fh, ft = '$HOLDER' .. name, '$TOKEN' .. name
local fn, fv = '$LEASES' .. SID, '$VERSION' .. SID
local bad, m = check_meta('$EXPIRY' .. SID, fn, fv, fh, ft, '$VALUE' .. name)
if bad then return bad end
if tonumber(m[5] or '0') <= NOW then return {'EXPIRED'} end
local h = m[8]
if h == SID then return {'OK', m[9], m[6] or 0, m[7] or 0, m[10]} end
if h then
  local held = holder(h, m[9])
  if held then
    wait(name, ARGV[5], NOW, MAXLEASE)
    return {'HELD', held[1], held[2], held[3], held[4]}
  end
end
if NOW < GUARD then
  wait(name, ARGV[5], NOW, MAXLEASE)
  return {'RECOVERING', GUARD - NOW}
end
local tok = math.max(TOKEN + 1, NOW)
if tok > 9007199254740991 then return {'TOKENS'} end -- 2^53-1
local ts = string.format('%d', tok)
local n, v = tonumber(m[6] or '0') + 1, tonumber(m[7] or '0') + 1
redis.call('HSET', META, 'token', ts, fh, SID, ft, ts, fn, string.format('%d', n), fv, string.format('%d', v))
redis.call('ZADD', P .. '$OWNED' .. SID, ts, name)
if ARGV[6] then touch_part(ARGV[6], tonumber(ARGV[7]), SID) end
return {'OK', tok, n, v, m[10]}
`, luaInfoNow, luaCheckMeta, luaHolder, luaWait, luaTouchPart)

	// The header and check_meta: checks the layout and the run id, reaps.
	// Reply: OK, the run id of the process, and its major version.
	scriptCheck = newScript("check", `
local bad = check_meta()
if bad then return bad end
reap()
return {'OK', RUN_ID, tonumber(string.match(INFO, 'redis_version:(%d+)') or '0')}
`, luaCheckMeta, luaReap)
)

var (
	// ARGV[3]: the lease name; ARGV[4]: the token; ARGV[5] and ARGV[6],
	// for a partition: its group and index. Reply: OK and the digest's
	// leases and version.
	//
	// Releasing takes five commands: the clock, one HMGET (the session's
	// expiry and digest, the lease's record, whether anyone waits), one
	// HDEL (the record), one HSET (the digest) and one ZREM (the owned
	// set); and the wake-up, only if someone waits.
	scriptRelease = newScript("release", `
local name = ARGV[3]
local fh, ft = '$HOLDER' .. name, '$TOKEN' .. name
local fn, fv = '$LEASES' .. SID, '$VERSION' .. SID
local m = redis.call('HMGET', META, '$EXPIRY' .. SID, fn, fv, fh, ft, '$WAITING' .. name)
if tonumber(m[1] or '0') <= NOW then return {'EXPIRED'} end
if m[4] ~= SID or m[5] ~= ARGV[4] then return {'OK', m[2] or 0, m[3] or 0} end
local n, v = tonumber(m[2] or '1') - 1, tonumber(m[3] or '0') + 1
redis.call('HDEL', META, fh, ft) -- the value, if any, stays
redis.call('HSET', META, fn, string.format('%d', n), fv, string.format('%d', v))
redis.call('ZREM', P .. '$OWNED' .. SID, name)
if ARGV[5] then touch_part(ARGV[5], tonumber(ARGV[6])) end
if m[6] then wake(name, SID) end
return {'OK', n, v}
`, luaClock, luaTouchPart, luaWake)

	// ARGV[3]: the lease name; ARGV[4]: the node id of the backend, which
	// the next release wakes if few candidates wait (luaWait); ARGV[5]:
	// MaxLease in µs. Reply: OK and the holder (see luaHolder), or OK alone
	// if the lease is free.
	scriptHolder = newScript("holder", `
local name = ARGV[3]
local m = redis.call('HMGET', META, '$EXPIRY' .. SID, '$HOLDER' .. name, '$TOKEN' .. name, '$WAITING' .. name)
if tonumber(m[1] or '0') <= NOW then return {'EXPIRED'} end
local h = m[2] and holder(m[2], m[3])
if h then
  wait(name, ARGV[4], NOW - 1099511627776, tonumber(ARGV[5]), m[4])
  return {'OK', h[1], h[2], h[3], h[4]}
end
return {'OK'}
`, luaClock, luaHolder, luaWait)

	// ARGV[3]: the lease name; ARGV[4]: the token; ARGV[5]: the value.
	scriptPutValue = newScript("put value", `
local name = ARGV[3]
local m = redis.call('HMGET', META, '$EXPIRY' .. SID, '$HOLDER' .. name, '$TOKEN' .. name)
if tonumber(m[1] or '0') <= NOW then return {'EXPIRED'} end
if m[2] ~= SID or m[3] ~= ARGV[4] then return {'NOTHOLDER'} end
redis.call('HSET', META, '$VALUE' .. name, ARGV[5])
return {'OK'}
`, luaClock)

	// ARGV[3]: the group; ARGV[4]: its partition count.
	scriptJoin = newScript("join", `
if not alive(SID) then return {'EXPIRED'} end
local g, n = ARGV[3], ARGV[4]
prune(g)
local parts = redis.call('HGET', P .. '$GROUP' .. g, 'parts')
if parts and parts ~= n then return {'MISMATCH', tonumber(parts)} end
if redis.call('SISMEMBER', P .. '$MEMBERS' .. g, SID) == 1 then return {'OK'} end
redis.call('SADD', P .. '$MEMBERS' .. g, SID)
redis.call('SADD', P .. '$JOINED' .. SID, g)
redis.call('HSET', P .. '$GROUP' .. g, 'parts', n, 'epoch', next_rev())
return {'OK'}
`, luaAlive, luaPrune, luaNextRev)

	// ARGV[3]: the group.
	scriptLeave = newScript("leave", `
if not alive(SID) then return {'EXPIRED'} end
local g = ARGV[3]
redis.call('SREM', P .. '$JOINED' .. SID, g)
if redis.call('SISMEMBER', P .. '$MEMBERS' .. g, SID) == 1 then
  leave_group(SID, g)
  redis.call('HSET', META, '$LEAVE' .. SID, next_rev())
end
return {'OK'}
`, luaAlive, luaLeaveGroup, luaNextRev)

	// ARGV[3]: the group. Reply: OK, partitions, members, holders as a flat
	// list of partition index and session id.
	scriptMembers = newScript("members", `
reap()
if not alive(SID) then return {'EXPIRED'} end
local g = ARGV[3]
prune(g)
local parts = tonumber(redis.call('HGET', P .. '$GROUP' .. g, 'parts') or '0')
if parts == 0 then return {'OK', 0, {}, {}} end
local holders = {}
local h = redis.call('HGETALL', P .. '$PARTHOLDERS' .. g)
for i = 1, #h, 2 do
  if tonumber(h[i]) < parts and alive(h[i + 1]) then
    holders[#holders + 1] = h[i]
    holders[#holders + 1] = h[i + 1]
  end
end
return {'OK', parts, redis.call('SMEMBERS', P .. '$MEMBERS' .. g), holders}
`, luaReap, luaAlive, luaPrune)

	// Ends the session at once, and releases what it holds within one
	// budget; MORE: call again to go on.
	scriptClose = newScript("close", `
local e = redis.call('ZSCORE', SESSIONS, SID)
if not e then return {'OK'} end
if tonumber(e) > 0 then end_now(SID) end
local _, done = end_session(SID, REAP_BUDGET)
if not done then return {'MORE'} end
return {'OK'}
`, luaSessions, luaSetExpiry, luaReapLimits, luaEndSession)
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
	return luaTags.Replace(src.String()), done[luaCheckMeta]
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
