-- The schema of Simba's PostgreSQL backend (package simbapg), version 1.
--
-- The backend runs this file itself on first use (unless it was opened with
-- WithoutMigration). A role that may not create schemas can have a DBA run it
-- once instead, in one transaction, naming the schema (default simba):
--
--	psql -1 -v schema=simba -f schema.sql
--
-- and grant the application's role the use of it (the functions run with
-- the rights of the schema's owner, so that is all the role needs):
--
--	GRANT USAGE ON SCHEMA simba TO app;
--
-- Running it again changes nothing, except that it replaces the functions of
-- a schema created by an older revision of this file (see the end). A schema
-- of a newer version, or with functions of a newer revision, is refused
-- (SQLSTATE SMB01), and so is an existing schema that holds anything else
-- (SMB02). Two runs at once wait for each other (an advisory lock).
--
-- Every operation of the backend is one call of one of the functions below.
-- They measure time with clock_timestamp() — the database's clock, read after
-- the rows a decision depends on are locked — never with now(), the start of
-- the transaction, and never with a client's clock.

\if :{?schema}
\else
\set schema simba
\endif

SELECT pg_advisory_xact_lock(1397312834, hashtext(:'schema'));

CREATE SCHEMA IF NOT EXISTS :"schema";
SET LOCAL search_path = :"schema", pg_temp;

DO $$
BEGIN
    IF to_regclass('meta') IS NULL THEN
        IF EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = current_schema()::regnamespace)
           OR EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = current_schema()::regnamespace) THEN
            RAISE EXCEPTION 'schema % holds other objects and no Simba schema', current_schema()
                USING ERRCODE = 'SMB02', HINT = 'Choose another schema for Simba.';
        END IF;
    ELSIF (SELECT version FROM meta) > 1 THEN
        RAISE EXCEPTION 'schema % is version %, newer than version 1', current_schema(), (SELECT version FROM meta)
            USING ERRCODE = 'SMB01';
    ELSIF coalesce(substring(obj_description('meta'::regclass, 'pg_class') FROM '^functions revision (\d+)$')::integer, 1) > 5 THEN
        RAISE EXCEPTION 'schema % has functions of a newer revision than 5 (%)', current_schema(),
            obj_description('meta'::regclass, 'pg_class') USING ERRCODE = 'SMB01';
    END IF;
END
$$;

-- One row: the schema's version, and when no lease may be granted before.
-- The guard starts when the schema is created: a schema that is created may
-- replace one that was lost (an empty or older backup restored, a new
-- cluster), whose holders still believe their terms valid until their local
-- deadlines, which no session was granted more than MaxLease for. So no lease
-- is granted until guard_from + MaxLease (the amnesia guard).
CREATE TABLE IF NOT EXISTS meta (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    version    integer NOT NULL,
    created_at timestamptz NOT NULL,
    guard_from timestamptz NOT NULL
);
-- Every role that may use the schema may read its version (the backend
-- checks it on first use).
GRANT SELECT ON meta TO PUBLIC;

-- Tokens: one sequence, started at the database clock in microseconds when
-- the schema is created, so that tokens exceed every token of a schema that
-- was lost before (as long as fewer than a million leases are granted per
-- second on average). CACHE 1: values increase in the order they are taken,
-- across connections.
CREATE SEQUENCE IF NOT EXISTS token_seq AS bigint MINVALUE 1 CACHE 1 NO CYCLE;

-- Revisions of the groups (their epochs) and of sessions' leaves; only
-- compared, never counted.
CREATE SEQUENCE IF NOT EXISTS rev_seq AS bigint MINVALUE 1 CACHE 1 NO CYCLE;

CREATE TABLE IF NOT EXISTS sessions (
    id         text COLLATE "C" PRIMARY KEY,
    identity   text NOT NULL,
    ttl        interval NOT NULL,               -- the time to live granted
    expires_at timestamptz NOT NULL,            -- database clock; -infinity once ended
    leases     integer NOT NULL DEFAULT 0,      -- Digest.Leases
    version    bigint NOT NULL DEFAULT 0,       -- Digest.Version: +1 per lease acquired or released
    left_rev   bigint NOT NULL DEFAULT 0        -- the revision of its last leave (Digest.Groups)
);
CREATE INDEX IF NOT EXISTS sessions_expiry ON sessions (expires_at);

-- Lease records are never deleted: a released lease keeps its last token
-- and its value.
CREATE TABLE IF NOT EXISTS leases (
    name       text COLLATE "C" PRIMARY KEY,
    session_id text COLLATE "C",                -- the holder; NULL when free
    token      bigint NOT NULL DEFAULT 0,       -- the last term's token
    value      bytea,                           -- PutValue's, kept across terms
    grp        text COLLATE "C",                -- for a partition name (group.i): the group
    part       integer                          -- and the index
);
CREATE INDEX IF NOT EXISTS leases_holder ON leases (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS leases_partition ON leases (grp, part) WHERE grp IS NOT NULL;

-- A group exists while it has members.
CREATE TABLE IF NOT EXISTS partition_groups (
    name       text COLLATE "C" PRIMARY KEY,
    partitions integer NOT NULL,
    epoch      bigint NOT NULL                  -- the revision of its last change
);

CREATE TABLE IF NOT EXISTS members (
    grp        text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (grp, session_id)
);
CREATE INDEX IF NOT EXISTS members_session ON members (session_id);

-- Created now: start the guard and the tokens.
WITH created AS (
    INSERT INTO meta (version, created_at, guard_from)
    VALUES (1, clock_timestamp(), clock_timestamp())
    ON CONFLICT (one) DO NOTHING
    RETURNING created_at
)
SELECT setval('token_seq', (extract(epoch FROM created_at) * 1000000)::bigint) FROM created;

-- Microseconds of an interval.
CREATE OR REPLACE FUNCTION us(i interval) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (extract(epoch FROM i) * 1000000)::bigint;

-- The channel releases are notified on: one per schema.
CREATE OR REPLACE FUNCTION channel() RETURNS text
LANGUAGE sql STABLE
RETURN current_schema() || '.released';

-- granted tells the grant of lease p_name to session p_session (token
-- p_tok, p_remaining_us left) to the backends that follow the name's
-- holder (backends.HolderNotifier). acquire calls it only if one does: a
-- follower holds a shared advisory lock keyed by the channel and the name
-- on a connection of its own (see notify.go), so that acquire's exclusive
-- try, pg_try_advisory_xact_lock(hashtextextended(channel() || ' ' ||
-- name, 0)), an expression in the caller rather than a call, fails. The try
-- costs a grant nobody follows one lock of the lock manager, released at
-- commit, and no NOTIFY, whose commit serialises on a global lock; held
-- until commit, it also makes a follower that starts meanwhile wait for
-- the commit and then read the grant. A key that another application's
-- advisory lock happens to share costs at most a message nobody reads.
-- The message starts with a space, so that a backend of an older
-- revision ignores it: " g <token> <remaining µs> <session> <name>
-- <identity>".
CREATE OR REPLACE FUNCTION granted(p_session text, p_name text, p_tok bigint, p_remaining_us bigint)
RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_notify(channel(), ' g ' || p_tok || ' ' || p_remaining_us || ' ' || p_session || ' ' || p_name || ' '
        || coalesce((SELECT identity FROM sessions WHERE id = p_session), ''));
END
$$;

-- end_session ends session p_id, whose row the caller has locked: it is dead
-- at once (expires_at -infinity), then up to p_budget of its leases and
-- memberships are released, waking watchers ("name session token" on the
-- channel), and once none is left its row is deleted. It returns the budget
-- left and whether it finished; a session not finished stays dead, and later
-- calls go on (reap). Locks: the session's leases, in name order, then the
-- groups involved, in name order.
CREATE OR REPLACE FUNCTION end_session(p_id text, p_budget integer, p_notify boolean,
    OUT budget integer, OUT done boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    groups text[] := '{}';
    joined text[];
    n integer := 0;
BEGIN
    budget := p_budget;
    UPDATE sessions SET expires_at = '-infinity' WHERE id = p_id AND expires_at <> '-infinity';
    IF budget > 0 THEN
        FOR r IN
            UPDATE leases l SET session_id = NULL
             WHERE l.name IN (SELECT x.name FROM leases x WHERE x.session_id = p_id ORDER BY x.name LIMIT budget)
               AND l.session_id = p_id
            RETURNING l.name, l.grp, l.part, l.token
        LOOP
            n := n + 1;
            IF r.grp IS NOT NULL THEN
                groups := groups || r.grp;
            END IF;
            IF p_notify THEN
                PERFORM pg_notify(channel(), r.name || ' ' || p_id || ' ' || r.token);
            END IF;
        END LOOP;
        budget := budget - n;
    END IF;
    IF budget > 0 THEN
        SELECT coalesce(array_agg(m.grp ORDER BY m.grp), '{}') INTO joined
          FROM (SELECT x.grp FROM members x WHERE x.session_id = p_id ORDER BY x.grp LIMIT budget) m;
        budget := budget - cardinality(joined);
    END IF;
    groups := groups || coalesce(joined, '{}');
    IF cardinality(groups) > 0 THEN
        -- Lock the groups first, in name order, so that no join adds a
        -- member to a group while it is deleted as empty.
        PERFORM 1 FROM partition_groups WHERE name = ANY (groups) ORDER BY name FOR UPDATE;
        IF cardinality(joined) > 0 THEN
            DELETE FROM members WHERE session_id = p_id AND grp = ANY (joined);
            DELETE FROM partition_groups g
             WHERE g.name = ANY (joined) AND NOT EXISTS (SELECT 1 FROM members m WHERE m.grp = g.name);
        END IF;
        -- A member ended, or a partition lost its holder (only indexes below
        -- the group's count are partitions; bumping for others is harmless).
        UPDATE partition_groups SET epoch = nextval('rev_seq') WHERE name = ANY (groups);
    END IF;
    done := budget > 0
        OR NOT EXISTS (SELECT 1 FROM leases WHERE session_id = p_id)
           AND NOT EXISTS (SELECT 1 FROM members WHERE session_id = p_id);
    IF done THEN
        DELETE FROM sessions WHERE id = p_id;
    END IF;
END
$$;

-- reap ends sessions that expired before p_now, the oldest first: at most 16
-- sessions and 1,000 of their leases and memberships per call, so that no
-- call blocks for long on other sessions' behalf. Rows locked by others are
-- skipped (SKIP LOCKED): their owner, or another reaper, is at them.
CREATE OR REPLACE FUNCTION reap(p_now timestamptz, p_notify boolean) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    budget integer := 1000;
    done boolean;
BEGIN
    FOR r IN
        SELECT id FROM sessions WHERE expires_at < p_now ORDER BY expires_at LIMIT 16 FOR UPDATE SKIP LOCKED
    LOOP
        SELECT e.budget, e.done INTO budget, done FROM end_session(r.id, budget, p_notify) e;
        EXIT WHEN NOT done OR budget <= 0;
    END LOOP;
END
$$;

-- The digest's groups: the largest epoch of the groups the session joined,
-- and the revision of its last leave. O(groups joined).
-- PL/pgSQL, not SQL: a SQL function with a SET clause is planned again at
-- every call (about 150 µs here, a third of a keep-alive), a PL/pgSQL one
-- keeps its plan for the connection.
CREATE OR REPLACE FUNCTION groups_digest(p_session text, p_left_rev bigint) RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN greatest(p_left_rev, (SELECT max(g.epoch) FROM members m JOIN partition_groups g ON g.name = m.grp
                                  WHERE m.session_id = p_session));
END
$$;

-- start_guard starts the amnesia guard by hand, for an event the schema
-- cannot see (a restore of older contents, a fail-over to a standby that
-- missed writes): every session ends (the reapers release what they held),
-- no lease is granted until MaxLease from now, and tokens continue from the
-- clock in microseconds, or above the highest recorded, whichever is more.
-- Values are kept. Only the schema's owner may call it.
CREATE OR REPLACE FUNCTION start_guard() RETURNS timestamptz
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    t timestamptz := clock_timestamp();
BEGIN
    UPDATE meta SET guard_from = t;
    UPDATE sessions SET expires_at = '-infinity' WHERE expires_at <> '-infinity';
    PERFORM setval('token_seq', greatest((SELECT last_value FROM token_seq), (extract(epoch FROM t) * 1000000)::bigint,
        (SELECT coalesce(max(token), 0) FROM leases)));
    RETURN t;
END
$$;

REVOKE ALL ON FUNCTION end_session(text, integer, boolean), reap(timestamptz, boolean),
    groups_digest(text, bigint), start_guard(), granted(text, text, bigint, bigint) FROM PUBLIC;

-- The operations. Each is SECURITY DEFINER: a role needs only USAGE on the
-- schema to call them, and no rights on the tables. Statuses: OK, EXPIRED
-- (the session is unknown, ended or expired), HELD, RECOVERING (the amnesia
-- guard), NOTHOLDER, MISMATCH, MORE (close: call again), EXISTS (open: the id
-- is taken by a session that ended).

-- open_session inserts the session, or renews it if a retry of this call
-- finds it alive, and reaps.
CREATE OR REPLACE FUNCTION open_session(p_id text, p_ttl interval, p_identity text, p_notify boolean,
    OUT status text, OUT ttl_us bigint, OUT store_time timestamptz,
    OUT n_leases integer, OUT ver bigint, OUT groups bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    t timestamptz := clock_timestamp();
    s sessions%ROWTYPE;
BEGIN
    INSERT INTO sessions (id, identity, ttl, expires_at) VALUES (p_id, p_identity, p_ttl, t + p_ttl)
    ON CONFLICT (id) DO NOTHING;
    IF FOUND THEN
        status := 'OK'; ttl_us := us(p_ttl); store_time := t; n_leases := 0; ver := 0; groups := 0;
    ELSE
        SELECT * INTO s FROM sessions WHERE id = p_id FOR NO KEY UPDATE;
        t := clock_timestamp();
        IF NOT FOUND OR s.expires_at <= t THEN
            status := 'EXISTS';
            RETURN;
        END IF;
        UPDATE sessions SET expires_at = t + s.ttl WHERE id = p_id;
        status := 'OK'; ttl_us := us(s.ttl); store_time := t;
        n_leases := s.leases; ver := s.version; groups := groups_digest(p_id, s.left_rev);
    END IF;
    PERFORM reap(t, p_notify);
END
$$;

-- keep_alive locks the session's row, then reads the clock: a keep-alive
-- that waited for the lock can never renew a session that expired while it
-- waited. An expired session is ended here. Then it reaps.
CREATE OR REPLACE FUNCTION keep_alive(p_session text, p_notify boolean,
    OUT status text, OUT ttl_us bigint, OUT store_time timestamptz,
    OUT n_leases integer, OUT ver bigint, OUT groups bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    t timestamptz;
    s sessions%ROWTYPE;
BEGIN
    SELECT * INTO s FROM sessions WHERE id = p_session FOR NO KEY UPDATE;
    t := clock_timestamp();
    IF NOT FOUND THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    IF s.expires_at <= t THEN
        PERFORM end_session(p_session, 1000, p_notify);
        status := 'EXPIRED';
        RETURN;
    END IF;
    UPDATE sessions SET expires_at = t + s.ttl WHERE id = p_session;
    status := 'OK'; ttl_us := us(s.ttl); store_time := t;
    n_leases := s.leases; ver := s.version; groups := groups_digest(p_session, s.left_rev);
    PERFORM reap(t, p_notify);
END
$$;

-- owned lists the session's leases, sorted by name, with its digest, in one
-- snapshot.
CREATE OR REPLACE FUNCTION owned(p_session text,
    OUT status text, OUT n_leases integer, OUT ver bigint, OUT groups bigint,
    OUT names text[], OUT tokens bigint[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    SELECT 'OK', s.leases, s.version, groups_digest(s.id, s.left_rev),
           coalesce(array_agg(l.name ORDER BY l.name) FILTER (WHERE l.name IS NOT NULL), '{}'),
           coalesce(array_agg(l.token ORDER BY l.name) FILTER (WHERE l.name IS NOT NULL), '{}')
      INTO status, n_leases, ver, groups, names, tokens
      FROM sessions s LEFT JOIN leases l ON l.session_id = s.id
     WHERE s.id = p_session AND s.expires_at > clock_timestamp()
     GROUP BY s.id;
    IF NOT FOUND THEN
        status := 'EXPIRED';
    END IF;
END
$$;

-- acquire takes lease p_name for the session.
--
-- It first reads the lease's holder and the amnesia guard, without a lock.
-- A lease held by another session: if both sessions are alive, the refusal
-- says who holds it, and takes no lock and writes nothing. A free (or new)
-- lease, outside the guard, takes the fast path: one UPDATE locks the
-- session's own row and counts the lease in its digest at once, and reads
-- the clock after the lock (RETURNING); then the lease record is locked,
-- and only then is the token taken, so that tokens follow the order of the
-- terms. If the session expired meanwhile, or another session took the lease
-- since the first read, the count is undone and the general path decides.
--
-- The general path (a retry of a grant, a holder that expired, the guard, a
-- lost race) locks, in this order, the session's own row (then reads the
-- clock), the holder's row if another session holds the lease (SKIP LOCKED:
-- it never waits for another session; a holder it cannot lock is busy, and
-- counts as alive), and the lease record, and takes the token only then. A
-- lease whose holder expired is taken over only by ending that session in
-- the same transaction: the old holder's keep-alive either came first (and
-- renewed it: refused here) or finds its session ended.
-- p_group and p_part name the group a partition name (group.i) belongs to.
CREATE OR REPLACE FUNCTION acquire(p_session text, p_name text, p_group text, p_part integer,
    p_max_lease interval, p_notify boolean,
    OUT status text, OUT tok bigint, OUT val bytea, OUT n_leases integer, OUT ver bigint,
    OUT h_session text, OUT h_identity text, OUT h_remaining_us bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    t timestamptz;
    own_expiry timestamptz;
    holder text;
    holder_expiry timestamptz;
    guard timestamptz;
    s sessions%ROWTYPE;
    h sessions%ROWTYPE;
    l leases%ROWTYPE;
    stale text;
BEGIN
    SELECT x.session_id, x.token, m.guard_from + p_max_lease INTO holder, tok, guard
      FROM meta m LEFT JOIN leases x ON x.name = p_name;
    IF holder IS NULL AND clock_timestamp() >= guard THEN
        -- The fast path runs as few statements as it can: each statement a
        -- function runs costs PostgreSQL some microseconds of executor
        -- set-up and clean-up, more than most of them then do.
        UPDATE sessions SET leases = sessions.leases + 1, version = sessions.version + 1 WHERE id = p_session
        RETURNING sessions.expires_at, clock_timestamp(), sessions.leases, sessions.version
             INTO own_expiry, t, n_leases, ver;
        IF NOT FOUND THEN
            status := 'EXPIRED';
            RETURN;
        END IF;
        IF own_expiry > t THEN
            SELECT * INTO l FROM leases WHERE name = p_name FOR NO KEY UPDATE;
            IF NOT FOUND THEN
                tok := nextval('token_seq'); -- a new record: the first term of the name
                INSERT INTO leases (name, session_id, token, grp, part) VALUES (p_name, p_session, tok, p_group, p_part)
                ON CONFLICT (name) DO NOTHING;
                IF FOUND THEN
                    l.grp := p_group; l.part := p_part;
                ELSE
                    tok := NULL; -- created by another call meanwhile
                END IF;
            ELSIF l.session_id IS NULL THEN
                tok := greatest(nextval('token_seq'), l.token + 1);
                UPDATE leases SET session_id = p_session, token = tok WHERE name = p_name;
                val := l.value;
            ELSE
                tok := NULL; -- taken since the first read
            END IF;
            IF tok IS NOT NULL THEN
                IF l.grp IS NOT NULL THEN
                    UPDATE partition_groups SET epoch = nextval('rev_seq') WHERE name = l.grp AND l.part < partitions;
                END IF;
                IF p_notify AND NOT pg_try_advisory_xact_lock(hashtextextended(channel() || ' ' || p_name, 0)) THEN
                    PERFORM granted(p_session, p_name, tok, us(own_expiry - t));
                END IF;
                status := 'OK';
                RETURN;
            END IF;
        END IF;
        UPDATE sessions SET leases = sessions.leases - 1, version = sessions.version - 1 WHERE id = p_session;
        n_leases := NULL; ver := NULL;
    ELSIF holder <> p_session THEN
        SELECT o.expires_at, hs.expires_at, hs.identity INTO own_expiry, holder_expiry, h_identity
          FROM sessions o LEFT JOIN sessions hs ON hs.id = holder
         WHERE o.id = p_session;
        IF NOT FOUND THEN
            status := 'EXPIRED';
            RETURN;
        END IF;
        t := clock_timestamp();
        IF own_expiry > t AND holder_expiry > t THEN
            status := 'HELD'; h_session := holder; h_remaining_us := us(holder_expiry - t);
            RETURN;
        END IF;
    END IF;

    -- The general path.
    SELECT * INTO s FROM sessions WHERE id = p_session FOR NO KEY UPDATE;
    t := clock_timestamp();
    IF NOT FOUND OR s.expires_at <= t THEN
        status := 'EXPIRED'; tok := NULL;
        RETURN;
    END IF;
    IF holder IS NOT NULL AND holder <> p_session THEN
        SELECT * INTO h FROM sessions WHERE id = holder FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            IF EXISTS (SELECT 1 FROM sessions WHERE id = holder) THEN
                status := 'HELD'; h_session := holder; h_remaining_us := greatest(0, coalesce(us(holder_expiry - t), 0));
                RETURN;
            END IF;
            stale := holder; -- its row is gone: the lease record is stale, and free
        ELSIF h.expires_at > clock_timestamp() THEN
            status := 'HELD'; h_session := holder; h_identity := h.identity;
            h_remaining_us := us(h.expires_at - clock_timestamp());
            RETURN;
        END IF;
    END IF;
    IF clock_timestamp() < guard THEN
        status := 'RECOVERING'; tok := NULL; h_identity := NULL; h_remaining_us := us(guard - clock_timestamp());
        RETURN;
    END IF;

    INSERT INTO leases (name, grp, part) VALUES (p_name, p_group, p_part) ON CONFLICT (name) DO NOTHING;
    SELECT * INTO l FROM leases WHERE name = p_name FOR UPDATE;
    IF l.session_id = p_session THEN
        status := 'OK'; tok := l.token; val := l.value; n_leases := s.leases; ver := s.version; h_identity := NULL;
        RETURN;
    END IF;
    IF l.session_id IS NOT NULL AND l.session_id IS DISTINCT FROM h.id AND l.session_id IS DISTINCT FROM stale THEN
        -- Another session took it since the first read: it is alive.
        SELECT x.identity, x.expires_at INTO h_identity, holder_expiry FROM sessions x WHERE x.id = l.session_id;
        status := 'HELD'; h_session := l.session_id; tok := l.token;
        h_remaining_us := greatest(0, coalesce(us(holder_expiry - clock_timestamp()), 0));
        RETURN;
    END IF;
    -- Free, or held by h, which expired and which this transaction locked,
    -- or by a session whose row is gone.
    tok := greatest(nextval('token_seq'), l.token + 1);
    UPDATE leases SET session_id = p_session, token = tok WHERE name = p_name;
    UPDATE sessions SET leases = sessions.leases + 1, version = sessions.version + 1 WHERE id = p_session
    RETURNING sessions.leases, sessions.version INTO n_leases, ver;
    IF h.id IS NOT NULL THEN
        PERFORM end_session(h.id, 1000, p_notify);
    END IF;
    IF l.grp IS NOT NULL THEN
        UPDATE partition_groups SET epoch = nextval('rev_seq') WHERE name = l.grp AND l.part < partitions;
    END IF;
    IF p_notify AND NOT pg_try_advisory_xact_lock(hashtextextended(channel() || ' ' || p_name, 0)) THEN
        PERFORM granted(p_session, p_name, tok, us(s.expires_at - t));
    END IF;
    status := 'OK'; val := l.value; h_identity := NULL;
END
$$;

-- acquire_batch takes each lease of p_names for the session (p_groups and
-- p_parts as for acquire, one per name), as so many calls of acquire, one
-- after the other in that order, would: one row per name, in order, with
-- acquire's columns, each name's digest the one right after its own grant.
-- It runs a handful of statements for the lot where acquire runs a few per
-- name: each statement a function runs costs PostgreSQL microseconds of
-- executor set-up, more than most of them then do.
--
-- It locks the session's row, then reads the clock and checks the session
-- and the amnesia guard once for the batch (outside the guard, or with the
-- session gone or expired, every name goes through acquire, which says
-- so). Then it locks the records of the names that are free (in name
-- order, so that two batches wait rather than deadlock). A name is granted
-- in bulk if it is no partition name (those bump their group's epoch), it
-- was not named before in the batch, and its record was free and is now
-- locked, or did not exist; every other name — held by another session,
-- live or expired, by this one, a partition, a repeat — goes through
-- acquire, at its place in the order. Each run of names granted in bulk
-- takes its tokens only then, one per name in order from the sequence, so
-- that tokens increase in the batch's order and per name with the terms,
-- and never repeat; writes its records in one INSERT … ON CONFLICT (a
-- record that another session created meanwhile, or whose token is not
-- below the new one, undoes the run, whose names then go through acquire
-- one by one); counts its grants in the session's digest in one UPDATE;
-- and tells the grants of followed names (see granted).
--
-- Its statements look names up in the leases by the array: a plan cached
-- while the table was small (PL/pgSQL keeps a generic plan per connection)
-- would scan the whole table, each batch slower than the one before as it
-- grows; enable_seqscan = off keeps them on the primary key (meta, which
-- has one row, is still scanned), and jit = off keeps the cost that this
-- adds to such a scan from compiling the statement (milliseconds).
CREATE OR REPLACE FUNCTION acquire_batch(p_session text, p_names text[], p_groups text[], p_parts integer[],
    p_max_lease interval, p_notify boolean)
RETURNS TABLE (status text, tok bigint, val bytea, n_leases integer, ver bigint,
    h_session text, h_identity text, h_remaining_us bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_t timestamptz;
    v_expiry timestamptz;
    v_guard timestamptz;
    v_k integer := coalesce(cardinality(p_names), 0);
    v_fast boolean[];
    v_vals bytea[];
    v_toks bigint[];
    v_i integer := 1;
    v_j integer;
    v_n integer;
    v_done integer;
    v_leases integer;
    v_ver bigint;
BEGIN
    SELECT m.guard_from + p_max_lease INTO v_guard FROM meta m;
    SELECT s.expires_at INTO v_expiry FROM sessions s WHERE s.id = p_session FOR NO KEY UPDATE;
    v_t := clock_timestamp();
    IF v_expiry IS NULL OR v_expiry <= v_t OR v_t < v_guard THEN
        RETURN QUERY SELECT a.* FROM unnest(p_names, p_groups, p_parts) WITH ORDINALITY AS x(name, grp, part, i)
            CROSS JOIN LATERAL acquire(p_session, x.name, x.grp, x.part, p_max_lease, p_notify) AS a ORDER BY x.i;
        RETURN;
    END IF;

    WITH locked AS MATERIALIZED (
        SELECT l.name, l.grp, l.value FROM leases l
         WHERE l.name = ANY (p_names) AND l.session_id IS NULL
         ORDER BY l.name FOR NO KEY UPDATE
    )
    SELECT array_agg(x.grp IS NULL AND x.first AND (k.name IS NOT NULL AND k.grp IS NULL OR c.name IS NULL) ORDER BY x.i),
           array_agg(k.value ORDER BY x.i)
      INTO v_fast, v_vals
      FROM (SELECT n.name, n.grp, n.i, row_number() OVER (PARTITION BY n.name ORDER BY n.i) = 1 AS first
              FROM unnest(p_names, p_groups) WITH ORDINALITY AS n(name, grp, i)) x
      LEFT JOIN locked k ON k.name = x.name
      LEFT JOIN leases c ON c.name = x.name;

    WHILE v_i <= v_k LOOP
        IF NOT v_fast[v_i] THEN
            RETURN QUERY SELECT a.* FROM acquire(p_session, p_names[v_i], p_groups[v_i], p_parts[v_i], p_max_lease, p_notify) AS a;
            v_i := v_i + 1;
            CONTINUE;
        END IF;
        v_j := v_i;
        WHILE v_j < v_k AND v_fast[v_j + 1] LOOP
            v_j := v_j + 1;
        END LOOP;
        v_n := v_j - v_i + 1;
        BEGIN
            v_toks := ARRAY(SELECT nextval('token_seq') FROM generate_series(1, v_n));
            INSERT INTO leases AS l (name, session_id, token)
            SELECT x.name, p_session, x.tok FROM unnest(p_names[v_i:v_j], v_toks) AS x(name, tok)
            ON CONFLICT (name) DO UPDATE SET session_id = excluded.session_id, token = excluded.token
             WHERE l.session_id IS NULL AND l.grp IS NULL AND l.token < excluded.token;
            GET DIAGNOSTICS v_done = ROW_COUNT;
            IF v_done < v_n THEN
                RAISE EXCEPTION 'a record changed under the batch' USING ERRCODE = 'SMB90';
            END IF;
            UPDATE sessions s SET leases = s.leases + v_n, version = s.version + v_n WHERE s.id = p_session
            RETURNING s.leases, s.version INTO v_leases, v_ver;
            IF p_notify THEN
                PERFORM granted(p_session, x.name, x.tok, us(v_expiry - v_t))
                   FROM unnest(p_names[v_i:v_j], v_toks) AS x(name, tok)
                  WHERE NOT pg_try_advisory_xact_lock(hashtextextended(channel() || ' ' || x.name, 0));
            END IF;
            RETURN QUERY SELECT 'OK'::text, x.tok, x.val, (v_leases - v_n + x.r)::integer, v_ver - v_n + x.r,
                    NULL::text, NULL::text, NULL::bigint
              FROM unnest(v_toks, v_vals[v_i:v_j]) WITH ORDINALITY AS x(tok, val, r);
        EXCEPTION WHEN SQLSTATE 'SMB90' THEN
            RETURN QUERY SELECT a.* FROM generate_series(v_i, v_j) AS x(i)
                CROSS JOIN LATERAL acquire(p_session, p_names[x.i], p_groups[x.i], p_parts[x.i], p_max_lease, p_notify) AS a
                ORDER BY x.i;
        END;
        v_i := v_j + 1;
    END LOOP;
END
$$;

-- release gives lease p_name up if the session holds it with token p_token.
-- One UPDATE locks the session's own row, counting the release in its digest
-- at once, and reads the clock after the lock (RETURNING); then the lease
-- record is freed if the session holds it with that token. A release that
-- frees nothing, or finds the session expired, undoes the count.
--
-- A release that frees a lease commits without waiting for its WAL to be
-- flushed (synchronous_commit off, for its transaction only). Losing it can
-- only keep a lease taken longer, never give one to two sessions: a
-- database that crashes before the flush comes back with the lease held by
-- the session that released it, whose next renewal finds a digest it did
-- not expect, reads its leases again and releases it once more (or it
-- expires); and any grant made after the release commits flushes the WAL up
-- to its own commit, so past the release it follows. Every other operation
-- that changes something waits for the flush: a lost renewal could make the
-- database expire a session sooner than its client was told.
CREATE OR REPLACE FUNCTION release(p_session text, p_name text, p_token bigint, p_notify boolean,
    OUT status text, OUT n_leases integer, OUT ver bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    own_expiry timestamptz;
    t timestamptz;
    g text;
    i integer;
BEGIN
    UPDATE sessions SET leases = sessions.leases - 1, version = sessions.version + 1 WHERE id = p_session
    RETURNING sessions.expires_at, clock_timestamp(), sessions.leases, sessions.version
         INTO own_expiry, t, n_leases, ver;
    IF NOT FOUND THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    IF own_expiry > t THEN
        UPDATE leases SET session_id = NULL WHERE name = p_name AND session_id = p_session AND token = p_token
        RETURNING grp, part INTO g, i;
        IF FOUND THEN
            IF g IS NOT NULL THEN
                UPDATE partition_groups SET epoch = nextval('rev_seq') WHERE name = g AND i < partitions;
            END IF;
            IF p_notify THEN
                PERFORM pg_notify(channel(), p_name || ' ' || p_session || ' ' || p_token);
            END IF;
            PERFORM set_config('synchronous_commit', 'off', true);
            status := 'OK';
            RETURN;
        END IF;
    END IF;
    UPDATE sessions SET leases = sessions.leases + 1, version = sessions.version - 1 WHERE id = p_session;
    IF own_expiry > t THEN
        status := 'OK'; n_leases := n_leases + 1; ver := ver - 1;
    ELSE
        status := 'EXPIRED'; n_leases := NULL; ver := NULL;
    END IF;
END
$$;

-- holders says who holds each lease of p_names, for a backend that follows
-- them (backends.HolderNotifier) once its advisory locks are in place (see
-- granted): a live session, its identity, token and remaining time; or no
-- session and the token of the lease's last term (0 for a name never
-- granted).
CREATE OR REPLACE FUNCTION holders(p_names text[])
RETURNS TABLE (name text, h_session text, h_identity text, tok bigint, h_remaining_us bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
BEGIN ATOMIC
    SELECT n.name, s.id, s.identity, coalesce(l.token, 0), us(s.expires_at - clock_timestamp())
      FROM unnest(p_names) AS n(name)
      LEFT JOIN leases l ON l.name = n.name
      LEFT JOIN sessions s ON s.id = l.session_id AND s.expires_at > clock_timestamp();
END;

-- holder says who holds lease p_name: a live session, or nobody.
CREATE OR REPLACE FUNCTION holder(p_session text, p_name text,
    OUT status text, OUT h_session text, OUT h_identity text, OUT tok bigint, OUT h_remaining_us bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    t timestamptz := clock_timestamp();
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_session AND expires_at > t;
    IF NOT FOUND THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    SELECT l.session_id, s.identity, l.token, us(s.expires_at - t)
      INTO h_session, h_identity, tok, h_remaining_us
      FROM leases l JOIN sessions s ON s.id = l.session_id
     WHERE l.name = p_name AND s.expires_at > t;
    status := 'OK';
END
$$;

-- put_value stores p_value with lease p_name if the session holds it with
-- token p_token. A key-share lock on its own row keeps the session from
-- ending meanwhile, and lets its keep-alive run.
CREATE OR REPLACE FUNCTION put_value(p_session text, p_name text, p_token bigint, p_value bytea,
    OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_session FOR KEY SHARE;
    IF NOT FOUND OR (SELECT expires_at FROM sessions WHERE id = p_session) <= clock_timestamp() THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    UPDATE leases SET value = p_value WHERE name = p_name AND session_id = p_session AND token = p_token;
    status := CASE WHEN FOUND THEN 'OK' ELSE 'NOTHOLDER' END;
END
$$;

-- join_group makes the session a member of group p_group of p_parts
-- partitions. First it ends the group's members whose sessions expired
-- (as reap does), then it locks the group's row (creating it), then checks
-- the count.
CREATE OR REPLACE FUNCTION join_group(p_session text, p_group text, p_parts integer, p_notify boolean,
    OUT status text, OUT partitions integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    created boolean := false;
    budget integer := 1000;
    done boolean;
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_session FOR KEY SHARE;
    IF NOT FOUND OR (SELECT expires_at FROM sessions WHERE id = p_session) <= clock_timestamp() THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    FOR r IN
        SELECT s.id FROM members m JOIN sessions s ON s.id = m.session_id
         WHERE m.grp = p_group AND s.expires_at < clock_timestamp()
         ORDER BY s.expires_at LIMIT 16 FOR UPDATE OF s SKIP LOCKED
    LOOP
        SELECT e.budget, e.done INTO budget, done FROM end_session(r.id, budget, p_notify) e;
        EXIT WHEN NOT done OR budget <= 0;
    END LOOP;
    LOOP
        SELECT g.partitions INTO join_group.partitions FROM partition_groups g WHERE g.name = p_group FOR UPDATE;
        EXIT WHEN FOUND;
        INSERT INTO partition_groups (name, partitions, epoch) VALUES (p_group, p_parts, nextval('rev_seq'))
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            join_group.partitions := p_parts;
            created := true;
            EXIT;
        END IF;
    END LOOP;
    IF join_group.partitions <> p_parts THEN
        status := 'MISMATCH';
        RETURN;
    END IF;
    INSERT INTO members (grp, session_id) VALUES (p_group, p_session) ON CONFLICT DO NOTHING;
    IF FOUND AND NOT created THEN
        UPDATE partition_groups SET epoch = nextval('rev_seq') WHERE name = p_group;
    END IF;
    status := 'OK';
END
$$;

-- leave_group ends the session's membership of p_group.
--
-- A leave that ends a membership commits without waiting for its WAL to be
-- flushed (synchronous_commit off, for its transaction only), as a release
-- does: a graceful stop leaves, then releases its partitions, and the member
-- that takes one over waits for its own grant's flush — which flushes the
-- leave's commit too, the WAL being one sequence — so a hand-over waits for
-- one flush, not two. Losing the leave in a crash cannot give a lease to two
-- sessions (grants decide that); it would leave the session listed as a
-- member that runs no partitions, whose share then idles. So the backend
-- leaves again, durably this time, at the session's next renewal (see
-- groups.go), unless the session joined the group again meanwhile.
CREATE OR REPLACE FUNCTION leave_group(p_session text, p_group text, OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_session AND expires_at > clock_timestamp() FOR NO KEY UPDATE;
    IF NOT FOUND OR (SELECT expires_at FROM sessions WHERE id = p_session) <= clock_timestamp() THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    status := 'OK';
    PERFORM 1 FROM partition_groups WHERE name = p_group FOR UPDATE;
    DELETE FROM members WHERE grp = p_group AND session_id = p_session;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM partition_groups g WHERE g.name = p_group AND NOT EXISTS (SELECT 1 FROM members m WHERE m.grp = p_group);
    IF NOT FOUND THEN
        UPDATE partition_groups SET epoch = nextval('rev_seq') WHERE name = p_group;
    END IF;
    UPDATE sessions SET left_rev = nextval('rev_seq') WHERE id = p_session;
    PERFORM set_config('synchronous_commit', 'off', true);
END
$$;

-- members lists the live members of p_group and the live holders of its
-- partitions, in one snapshot. A group whose members all expired has none.
CREATE OR REPLACE FUNCTION members_of(p_session text, p_group text,
    OUT status text, OUT partitions integer, OUT member_ids text[], OUT parts integer[], OUT holders text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    t timestamptz := clock_timestamp();
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_session AND expires_at > t;
    IF NOT FOUND THEN
        status := 'EXPIRED';
        RETURN;
    END IF;
    status := 'OK';
    SELECT g.partitions,
           (SELECT array_agg(m.session_id ORDER BY m.session_id) FROM members m JOIN sessions s ON s.id = m.session_id
             WHERE m.grp = g.name AND s.expires_at > t)
      INTO members_of.partitions, member_ids
      FROM partition_groups g WHERE g.name = p_group;
    IF member_ids IS NULL THEN
        members_of.partitions := 0; member_ids := '{}'; parts := '{}'; holders := '{}';
        RETURN;
    END IF;
    SELECT coalesce(array_agg(l.part ORDER BY l.part), '{}'), coalesce(array_agg(l.session_id ORDER BY l.part), '{}')
      INTO parts, holders
      FROM leases l JOIN sessions s ON s.id = l.session_id
     WHERE l.grp = p_group AND l.part < members_of.partitions AND s.expires_at > t;
END
$$;

-- close_session ends the session at once, and releases up to 1,000 of its
-- leases and memberships: MORE means call again to go on (other sessions'
-- reaping would finish it too).
CREATE OR REPLACE FUNCTION close_session(p_session text, p_notify boolean, OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    done boolean;
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        status := 'OK';
        RETURN;
    END IF;
    SELECT e.done INTO done FROM end_session(p_session, 1000, p_notify) e;
    status := CASE WHEN done THEN 'OK' ELSE 'MORE' END;
END
$$;

-- The listing of status tools (backends.Inspector), in pages of at most
-- p_limit rows after p_after, by id or name.
CREATE OR REPLACE FUNCTION inspect_sessions(p_after text, p_limit integer)
RETURNS TABLE (id text, identity text, remaining_us bigint, leases integer, store_time timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
BEGIN ATOMIC
    SELECT s.id, s.identity, us(s.expires_at - t.now), s.leases, t.now
      FROM sessions s, (SELECT clock_timestamp() AS now) t
     WHERE s.id > p_after AND s.expires_at > t.now
     ORDER BY s.id LIMIT p_limit;
END;

CREATE OR REPLACE FUNCTION inspect_leases(p_after text, p_limit integer)
RETURNS TABLE (name text, session_id text, identity text, token bigint, value bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
BEGIN ATOMIC
    SELECT l.name, l.session_id, s.identity, l.token, l.value
      FROM leases l JOIN sessions s ON s.id = l.session_id
     WHERE l.name > p_after AND s.expires_at > clock_timestamp()
     ORDER BY l.name LIMIT p_limit;
END;

CREATE OR REPLACE FUNCTION inspect_groups(p_after text, p_limit integer)
RETURNS TABLE (name text, partitions integer, member_ids text[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
BEGIN ATOMIC
    SELECT g.name, g.partitions, m.ids
      FROM partition_groups g,
           LATERAL (SELECT array_agg(x.session_id ORDER BY x.session_id) AS ids
                      FROM members x JOIN sessions s ON s.id = x.session_id
                     WHERE x.grp = g.name AND s.expires_at > clock_timestamp()) m
     WHERE g.name > p_after AND m.ids IS NOT NULL
     ORDER BY g.name LIMIT p_limit;
END;

-- The revision of the functions of this file. The tables and the functions'
-- signatures are those of version 1 in every revision, so that code of one
-- revision works with the functions of another (a revision may add a
-- function, which the backend calls only once it found the schema at that
-- revision or later; acquire_batch came with revision 5): the backend runs this file
-- again on first use when it finds an older revision, to install faster
-- functions, and the check at the top refuses a newer one. Revision 1 (no
-- comment) ran more statements per acquire and release; revision 2 waited
-- for a release's commit to be flushed; revision 3 told releases without
-- the ended term's token, and grants not at all, and waited for a leave's
-- commit to be flushed; revision 4 had no acquire_batch (the backend called
-- acquire once per name of a batch).
COMMENT ON TABLE meta IS 'functions revision 5';
