package simbaredis

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
)

// Every operation is one Lua script, run with EVALSHA (EVAL after a
// NOSCRIPT reply), so that it is one atomic round trip. Its Lua lives in
// lua/<operation>.lua, and the helpers it includes in lua/lib/<helper>.lua.
// Every script starts with the header (lua/header.lua) and includes only the
// helpers it uses (newScript adds the helpers they use in turn): the scripts
// run often — an acquire
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
// In the Lua sources, $NAME stands for a tag of keys.go or a constant of
// this file (luaTags): '$EXPIRY' .. id is the field e:<id>.
var luaHeader = luaSource("header.lua")

// luaFiles holds the Lua sources: lua/*.lua, one per operation, and
// lua/lib/*.lua, the helpers they include.
//
//go:embed lua
var luaFiles embed.FS

// luaSource returns the Lua source of file (a path under lua/) as the
// scripts include it: without its opening comment lines, which document it
// and which Redis need not read; from the line after them on, byte for
// byte, so that a script's SHA1 changes only when its code does.
func luaSource(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("simbaredis: " + err.Error()) // a file of the package is missing: a build mistake
	}
	src := string(b)
	for strings.HasPrefix(src, "--") {
		_, src, _ = strings.Cut(src, "\n")
	}
	return src
}

// luaTags replaces the $NAME placeholders of the Lua sources with the tags of
// keys.go and the constants the scripts share with the Go side (the layout
// version, the reaping limits, the wake-ups per release). No placeholder may
// begin with another ($WAKE would win over a $WAKEN): the replacer takes the
// first of the list that matches.
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
	"$FOLLOWED", fieldFollowed,
	"$FOLLOWERS", tagFollow,
	"$OWNED", tagOwned,
	"$JOINED", tagJoined,
	"$GROUP", tagGroup,
	"$MEMBERS", tagMembers,
	"$PARTHOLDERS", tagHolders,
	"$MEMBERNODES", tagNodes,
	"$WAITERS", tagWaiters,
	"$WAKE", tagWake,
	"$SESSIONS", tagSessions,
	"$LAYOUTVERSION", layoutVersion,
	"$METAABOUT", metaAbout,
	"$REAPBUDGET", strconv.Itoa(reapBudget),
	"$REAPSESSIONS", strconv.Itoa(reapSessions),
	"$RELEASEWAKES", strconv.Itoa(wakePerRelease),
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

	luaNow            = helper(luaSource("lib/now.lua"))
	luaInfo           = helper(luaSource("lib/info.lua"))
	luaInfoNow        = helper(luaSource("lib/info_now.lua"), luaInfo)
	luaNextRev        = helper(luaSource("lib/next_rev.lua"))
	luaSplitPartition = helper(luaSource("lib/split_partition.lua"))
	luaTouchPart      = helper(luaSource("lib/touch_part.lua"), luaNextRev)
	luaTouchPartition = helper(luaSource("lib/touch_partition.lua"), luaSplitPartition, luaTouchPart)
	luaLeaveGroup     = helper(luaSource("lib/leave_group.lua"), luaNextRev)
	luaReapLimits     = helper(luaSource("lib/reap_limits.lua"))
	luaSetExpiry      = helper(luaSource("lib/set_expiry.lua"), luaSessions)
	luaEndSession     = helper(luaSource("lib/end_session.lua"), luaTouchPartition, luaWake, luaWakeMembers, luaTell, luaLeaveGroup, luaSessions)
	luaWake           = helper(luaSource("lib/wake.lua"))
	luaWakeMembers    = helper(luaSource("lib/wake_members.lua"))
	luaWait           = helper(luaSource("lib/wait.lua"))
	luaTell           = helper(luaSource("lib/tell.lua"), luaClock)
	luaAlive          = helper(luaSource("lib/alive.lua"), luaClock)
	luaCheckMeta      = helper(luaSource("lib/check_meta.lua"), luaInfo, luaClock, luaSessions, luaLayout)
	luaArmedMeta      = helper(luaSource("lib/armed_meta.lua"), luaClock, luaLayout)
	luaLayout         = helper(luaSource("lib/layout.lua"))
	luaHolder         = helper(luaSource("lib/holder.lua"), luaClock)
	luaRenewal        = helper(luaSource("lib/renewal.lua"), luaClock)
	luaPrune          = helper(luaSource("lib/prune.lua"), luaAlive, luaLeaveGroup)
	luaReap           = helper(luaSource("lib/reap.lua"), luaSessions, luaClock, luaReapLimits, luaEndSession)
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
	scriptOpen      = newScript("open", luaSource("open.lua"), luaCheckMeta, luaReap, luaSetExpiry, luaRenewal)
	scriptKeepAlive = newScript("keep-alive", luaSource("keep_alive.lua"), luaCheckMeta, luaReap, luaSetExpiry, luaRenewal)
	scriptOwned     = newScript("owned", luaSource("owned.lua"), luaCheckMeta, luaReap, luaRenewal)
	scriptAcquire   = newScript("acquire", luaSource("acquire.lua"), luaInfoNow, luaCheckMeta, luaHolder, luaWait, luaTouchPart, luaTell)
	scriptCheck     = newScript("check", luaSource("check.lua"), luaCheckMeta, luaReap)

	scriptAcquireBatch = newScript("acquire batch", batchOf("acquire", "acquire.lua", "acquire_batch.lua"),
		luaInfoNow, luaCheckMeta, luaHolder, luaWait, luaTouchPart, luaTell)
)

var (
	scriptRelease  = newScript("release", luaSource("release.lua"), luaClock, luaTouchPart, luaWake, luaWakeMembers, luaTell)
	scriptHolder   = newScript("holder", luaSource("holder.lua"), luaClock, luaHolder, luaWait)
	scriptPutValue = newScript("put value", luaSource("put_value.lua"), luaClock)
	scriptJoin     = newScript("join", luaSource("join.lua"), luaAlive, luaPrune, luaNextRev)
	scriptLeave    = newScript("leave", luaSource("leave.lua"), luaAlive, luaLeaveGroup, luaNextRev)
	scriptMembers  = newScript("members", luaSource("members.lua"), luaReap, luaAlive, luaPrune)
	scriptFollow   = newScript("follow", luaSource("follow.lua"), luaClock, luaLayout, luaHolder)
	scriptClose    = newScript("close", luaSource("close.lua"), luaSessions, luaSetExpiry, luaReapLimits, luaEndSession)

	scriptReleaseBatch = newScript("release batch", batchOf("release", "release.lua", "release_batch.lua"),
		luaClock, luaTouchPart, luaWake, luaWakeMembers, luaTell)
)

// batchOf returns the body of a batch script (backends.BatchSession): the
// operation's script, file, as the function <op>_one of its arguments — a
// parameter named ARGV stands for the script's own, so that its code is the
// same, byte for byte, as the single call's — then the batch's loop, batch,
// which calls it once per lease.
func batchOf(op, file, batch string) string {
	return "local function " + op + "_one(ARGV)\n" + luaSource(file) + "end\n" + luaSource(batch)
}

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
	argv := b.argv(sc, sid, args)
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
	return b.decode(ctx, sc, what, sid, res, err)
}

// argv returns the arguments of a call of sc by session sid (see above).
func (b *Backend) argv(sc *script, sid any, args []any) []any {
	argv := make([]any, 0, 3+len(args))
	argv = append(argv, b.baseArg, sid)
	if sc.guarded {
		argv = append(argv, b.maxLeaseArg)
	}
	return append(argv, args...)
}

// decode turns the outcome of a call of sc into its reply, or the error its
// status stands for.
func (b *Backend) decode(ctx context.Context, sc *script, what string, sid, res any, err error) (reply, error) {
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
