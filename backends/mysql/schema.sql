-- The tables and procedures of Simba's MySQL/MariaDB backend (package
-- simbamysql), schema version 1, routines revision 4.
--
-- The backend runs this file itself on first use (unless it was opened
-- WithoutMigration). A user that may not create tables and routines can have
-- a DBA run it once instead, in the application's database, with the mysql
-- client:
--
--	mysql app < schema.sql
--
-- and grant the application's user the right to call the procedures (they
-- run with the rights of their definer, so that is all it needs):
--
--	GRANT EXECUTE ON app.* TO 'app'@'%';
--
-- Every name below starts with the prefix simba_; SchemaSQL(prefix) returns
-- this file for another prefix. Running it again changes nothing but the
-- procedures, which it replaces by this revision's. The backend refuses tables
-- of a newer version, and a prefix whose tables are not Simba's.
--
-- Every operation of the backend is one CALL of one procedure below. Each
-- reads the clock as @@timestamp in microseconds: the time at which the
-- statement that reads it began, in UTC whatever the session's time_zone, and
-- read only after the rows a decision depends on are locked (NOW(6) and
-- UTC_TIMESTAMP(6) in a single statement are fixed at its start, before any
-- lock wait). Expiries are kept as microseconds since the Unix epoch, never as
-- DATETIME values that a time zone could shift. Writes run in READ COMMITTED
-- transactions (no gap locks; every locking read sees the latest committed
-- row) with lock waits bounded to a second.

-- One row: the schema's version, the routines' revision, when the tables
-- were created, and when the amnesia guard began: no lease is granted until
-- guard_from_us + MaxLease.
CREATE TABLE IF NOT EXISTS simba_meta (
    one           TINYINT NOT NULL PRIMARY KEY,
    version       INT NOT NULL,
    routines      INT NOT NULL,
    created_us    BIGINT NOT NULL,
    guard_from_us BIGINT NOT NULL
) ENGINE=InnoDB;

-- Counters: 1 the last token, 3 the groups' revisions.
CREATE TABLE IF NOT EXISTS simba_seq (
    id TINYINT NOT NULL PRIMARY KEY,
    v  BIGINT NOT NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS simba_sessions (
    id         VARBINARY(32) NOT NULL PRIMARY KEY,
    identity   VARBINARY(256) NOT NULL,
    ttl_us     BIGINT NOT NULL,             -- the time to live granted
    expires_us BIGINT NOT NULL,             -- database clock, µs since the epoch; 0 once ended
    leases     INT NOT NULL DEFAULT 0,      -- Digest.Leases
    version    BIGINT NOT NULL DEFAULT 0,   -- Digest.Version: +1 per lease acquired or released
    left_rev   BIGINT NOT NULL DEFAULT 0,   -- the revision of its last leave (Digest.Groups)
    KEY simba_sessions_expiry (expires_us)
) ENGINE=InnoDB;

-- Lease records are never deleted: a released lease keeps its last token and
-- its value. rel (the database clock in microseconds) and released_by record
-- the last release, for the poll of release notifications.
CREATE TABLE IF NOT EXISTS simba_leases (
    name        VARBINARY(128) NOT NULL PRIMARY KEY,
    session_id  VARBINARY(32) NULL,
    token       BIGINT NOT NULL DEFAULT 0,
    value       VARBINARY(4096) NULL,
    grp         VARBINARY(128) NULL,
    part        INT NULL,
    rel         BIGINT NOT NULL DEFAULT 0,
    released_by VARBINARY(32) NULL,
    KEY simba_leases_holder (session_id),
    KEY simba_leases_partition (grp, part),
    KEY simba_leases_rel (rel)
) ENGINE=InnoDB;

-- A group exists while it has members.
CREATE TABLE IF NOT EXISTS simba_groups (
    name       VARBINARY(128) NOT NULL PRIMARY KEY,
    partitions INT NOT NULL,
    epoch      BIGINT NOT NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS simba_members (
    grp        VARBINARY(128) NOT NULL,
    session_id VARBINARY(32) NOT NULL,
    PRIMARY KEY (grp, session_id),
    KEY simba_members_session (session_id)
) ENGINE=InnoDB;

-- Created now: the guard starts, and so do the tokens, at the database clock
-- in microseconds.
INSERT IGNORE INTO simba_meta (one, version, routines, created_us, guard_from_us)
VALUES (1, 1, 0, CAST(@@timestamp * 1000000 AS SIGNED), CAST(@@timestamp * 1000000 AS SIGNED));
INSERT IGNORE INTO simba_seq (id, v) VALUES (1, CAST(@@timestamp * 1000000 AS SIGNED)), (3, 0);

DELIMITER //

-- simba_end_session ends session p_id, whose row the caller has locked: it
-- is dead at once (expires_us 0), then up to p_budget of its leases and
-- memberships are released (the leases' releases numbered with the clock in
-- microseconds, for the poll of notifications), and once none is left its row is deleted. p_budget comes back
-- reduced by what was released; p_done says whether the session is gone.
-- Locks: the session's leases, then the groups involved, then their members.
DROP PROCEDURE IF EXISTS simba_end_session//
CREATE PROCEDURE simba_end_session(IN p_id VARBINARY(32), INOUT p_budget INT, OUT p_done BOOLEAN)
MODIFIES SQL DATA
BEGIN
    DECLARE v_rel, v_rev BIGINT;
    DECLARE v_n INT DEFAULT 0;
    UPDATE simba_sessions SET expires_us = 0 WHERE id = p_id AND expires_us <> 0;
    IF p_budget > 0 THEN
        SET v_rel = CAST(@@timestamp * 1000000 AS SIGNED);
        UPDATE simba_leases SET session_id = NULL, rel = v_rel, released_by = p_id
         WHERE session_id = p_id ORDER BY name LIMIT p_budget;
        SET v_n = ROW_COUNT(); -- every matched row changes: session_id becomes NULL
        SET p_budget = p_budget - v_n;
    END IF;
    SELECT v + 1 INTO v_rev FROM simba_seq WHERE id = 3 FOR UPDATE;
    UPDATE simba_seq SET v = v_rev WHERE id = 3;
    -- A member ended, or a partition lost its holder.
    UPDATE simba_groups SET epoch = v_rev
     WHERE name IN (SELECT grp FROM simba_leases WHERE v_n > 0 AND rel = v_rel AND released_by = p_id AND grp IS NOT NULL)
        OR name IN (SELECT grp FROM simba_members WHERE session_id = p_id);
    IF p_budget > 0 THEN
        DELETE FROM simba_members WHERE session_id = p_id ORDER BY grp LIMIT p_budget;
        SET p_budget = p_budget - ROW_COUNT();
        DELETE FROM simba_groups
         WHERE epoch = v_rev AND NOT EXISTS (SELECT 1 FROM simba_members m WHERE m.grp = simba_groups.name);
    END IF;
    SET p_done = NOT EXISTS (SELECT 1 FROM simba_leases WHERE session_id = p_id)
             AND NOT EXISTS (SELECT 1 FROM simba_members WHERE session_id = p_id);
    IF p_done THEN
        DELETE FROM simba_sessions WHERE id = p_id;
    END IF;
END//

-- simba_reap ends sessions that expired before p_now, the oldest first: at
-- most 16 sessions and 1,000 of their leases and memberships per call, in a
-- transaction of its own, so that no call blocks for long on other sessions'
-- behalf. Rows locked by others are skipped (SKIP LOCKED): their owner, or
-- another reaper, is at them. The groups' revision counter, which ending a
-- session moves, is locked first, and skipped too when another transaction
-- holds it (another reaper, a leave, a join): one reaper at a time, and no
-- keep-alive's reply waits behind another call's reaping — until revision 4
-- it waited, up to the lock wait bound (1 s), for the counter. It never
-- fails its caller: a reaping that fails (a lock wait timed out, a deadlock)
-- is rolled back, and the next call reaps.
DROP PROCEDURE IF EXISTS simba_reap//
CREATE PROCEDURE simba_reap(IN p_now BIGINT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_id VARBINARY(32);
    DECLARE v_budget INT DEFAULT 1000;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_done BOOLEAN;
    DECLARE v_rev BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION ROLLBACK;
    IF EXISTS (SELECT 1 FROM simba_sessions WHERE expires_us < p_now) THEN
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        SELECT v INTO v_rev FROM simba_seq WHERE id = 3 FOR UPDATE SKIP LOCKED;
        reaping: WHILE v_rev IS NOT NULL AND v_i < 16 AND v_budget > 0 DO
            SET v_id = NULL, v_i = v_i + 1;
            SELECT id INTO v_id FROM simba_sessions WHERE expires_us < p_now
             ORDER BY expires_us LIMIT 1 FOR UPDATE SKIP LOCKED;
            IF v_id IS NULL THEN
                LEAVE reaping;
            END IF;
            CALL simba_end_session(v_id, v_budget, v_done);
            IF NOT v_done THEN
                LEAVE reaping;
            END IF;
        END WHILE;
        COMMIT;
    END IF;
END//

-- simba_groups_digest returns the digest's groups: the largest epoch of the
-- groups the session joined, or the revision of its last leave.
DROP FUNCTION IF EXISTS simba_groups_digest//
CREATE FUNCTION simba_groups_digest(p_session VARBINARY(32), p_left_rev BIGINT) RETURNS BIGINT
READS SQL DATA
RETURN GREATEST(p_left_rev, COALESCE((SELECT MAX(g.epoch) FROM simba_members m JOIN simba_groups g ON g.name = m.grp
                                        WHERE m.session_id = p_session), 0))//

-- The operations. Each replies with one row whose first column is a status:
-- OK, EXPIRED (the session is unknown, ended or expired), HELD, RECOVERING
-- (the amnesia guard), NOTHOLDER, MISMATCH, MORE (close: call again), EXISTS
-- (open: the id is taken by a session that ended). Each sets its lock wait
-- bound for the call and puts the session's own back.

-- simba_open inserts the session, or renews it if a retry of this call finds
-- it alive, then reaps.
DROP PROCEDURE IF EXISTS simba_open//
CREATE PROCEDURE simba_open(IN p_id VARBINARY(32), IN p_ttl_us BIGINT, IN p_identity VARBINARY(256))
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_t, v_exp, v_ttl BIGINT;
    DECLARE v_n INT;
    DECLARE v_ver, v_left BIGINT;
    DECLARE v_status VARCHAR(16) DEFAULT 'OK';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT expires_us, ttl_us, leases, version, left_rev INTO v_exp, v_ttl, v_n, v_ver, v_left
      FROM simba_sessions WHERE id = p_id FOR UPDATE;
    SET v_t = CAST(@@timestamp * 1000000 AS SIGNED);
    IF v_exp IS NULL THEN
        INSERT INTO simba_sessions (id, identity, ttl_us, expires_us) VALUES (p_id, p_identity, p_ttl_us, v_t + p_ttl_us);
        SET v_ttl = p_ttl_us, v_n = 0, v_ver = 0, v_left = 0;
    ELSEIF v_exp <= v_t THEN
        SET v_status = 'EXISTS';
    ELSE
        UPDATE simba_sessions SET expires_us = v_t + v_ttl WHERE id = p_id;
    END IF;
    COMMIT;
    IF v_status = 'OK' THEN
        CALL simba_reap(v_t);
    END IF;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    IF v_status = 'OK' THEN
        SELECT v_status, v_ttl, v_t, v_n, v_ver, simba_groups_digest(p_id, v_left);
    ELSE
        SELECT v_status, NULL, NULL, NULL, NULL, NULL;
    END IF;
END//

-- simba_keep_alive locks the session's row, then reads the clock: a
-- keep-alive that waited for the lock can never renew a session that expired
-- while it waited. An expired session is ended here. Then it reaps. Its cost
-- does not grow with the leases held.
DROP PROCEDURE IF EXISTS simba_keep_alive//
CREATE PROCEDURE simba_keep_alive(IN p_session VARBINARY(32))
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_t, v_exp, v_ttl, v_ver, v_left BIGINT;
    DECLARE v_n, v_budget INT;
    DECLARE v_done BOOLEAN;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT expires_us, ttl_us, leases, version, left_rev INTO v_exp, v_ttl, v_n, v_ver, v_left
      FROM simba_sessions WHERE id = p_session FOR UPDATE;
    SET v_t = CAST(@@timestamp * 1000000 AS SIGNED);
    IF v_exp IS NULL THEN
        COMMIT;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        SELECT 'EXPIRED', NULL, NULL, NULL, NULL, NULL;
    ELSEIF v_exp <= v_t THEN
        SET v_budget = 1000;
        CALL simba_end_session(p_session, v_budget, v_done);
        COMMIT;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        SELECT 'EXPIRED', NULL, NULL, NULL, NULL, NULL;
    ELSE
        UPDATE simba_sessions SET expires_us = v_t + v_ttl WHERE id = p_session;
        COMMIT;
        CALL simba_reap(v_t);
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        SELECT 'OK', v_ttl, v_t, v_n, v_ver, simba_groups_digest(p_session, v_left);
    END IF;
END//

-- simba_owned lists the session's leases with its digest, in one statement
-- (one snapshot): a row ('D', NULL, leases, version, groups) first, then one
-- ('L', name, token, 0, 0) per lease in name order; no row if the session is
-- not alive.
DROP PROCEDURE IF EXISTS simba_owned//
CREATE PROCEDURE simba_owned(IN p_session VARBINARY(32))
READS SQL DATA
BEGIN
    SELECT 'D' AS k, NULL AS name, s.leases AS a, s.version AS b, simba_groups_digest(s.id, s.left_rev) AS c
      FROM simba_sessions s WHERE s.id = p_session AND s.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
    UNION ALL
    SELECT 'L', l.name, l.token, 0, 0
      FROM simba_leases l JOIN simba_sessions s ON s.id = l.session_id
     WHERE l.session_id = p_session AND s.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
    ORDER BY k, name;
END//

-- simba_acquire takes lease p_name for the session.
--
-- One read without locks answers the refusals: a lease held by another live
-- session (naming the holder), the amnesia guard (read there: it moves only
-- when the tables are created or start_guard runs, before clients come), and
-- a session that expired; they lock and write nothing, so candidates never
-- queue on their own session's row or on the lease's. Otherwise, in a
-- transaction, it locks the session's own row, then the lease record (created
-- first if the name is new) — or, if another call holds the record locked (a
-- competing grant, or the holder's release), refuses at once (SKIP LOCKED),
-- so that the candidates one release wakes never line up, and the winner's
-- release never waits behind them. A free lease is granted at once: the
-- token is minted only now, so that tokens follow the order of the terms —
-- the greatest of the counter plus one, the lease's last token plus one and
-- the clock in microseconds, read after the locks (LAST_INSERT_ID keeps it
-- for the next statement of the same connection) — and, if the session is
-- still alive by the clock read after the locks, one UPDATE grants the lease
-- and counts it in the session's digest. A retry of a grant this session
-- holds returns the same term.
--
-- A lease held by another session that the locked read finds alive is
-- refused likewise. If it expired, the lease is taken
-- over only by ending that session in the same transaction, with its row
-- locked (SKIP LOCKED: a takeover never waits for another session; a holder
-- it cannot lock is busy, and counts as alive): the old holder's keep-alive
-- either came first (and renewed it: refused here) or finds its session
-- ended.
DROP PROCEDURE IF EXISTS simba_acquire//
CREATE PROCEDURE simba_acquire(IN p_session VARBINARY(32), IN p_name VARBINARY(128), IN p_grp VARBINARY(128), IN p_part INT,
    IN p_max_lease_us BIGINT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_t, v_exp, v_ver, v_tok, v_hexp, v_guard, v_seq BIGINT;
    DECLARE v_n, v_budget INT;
    DECLARE v_holder, v_taken VARBINARY(32);
    DECLARE v_ident VARBINARY(256);
    DECLARE v_val VARBINARY(4096);
    DECLARE v_grp, v_lname VARBINARY(128);
    DECLARE v_part INT;
    DECLARE v_done BOOLEAN;
    DECLARE v_fast BOOLEAN DEFAULT FALSE;
    DECLARE v_status VARCHAR(16) DEFAULT 'OK';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    -- One read without locks: the guard, whether this session is alive (and
    -- its digest), the lease's record, and its holder if another live
    -- session holds it. Refusals (held, the guard, an expired session) end
    -- here, locking and writing nothing, so that candidates never queue on
    -- their own session's row or the lease's.
    SELECT m.guard_from_us + p_max_lease_us, o.expires_us, o.leases, o.version, l.name, l.session_id, l.token,
           h.expires_us, h.identity, CAST(@@timestamp * 1000000 AS SIGNED)
      INTO v_guard, v_exp, v_n, v_ver, v_lname, v_holder, v_tok, v_hexp, v_ident, v_t
      FROM simba_meta m
      LEFT JOIN simba_sessions o ON o.id = p_session
      LEFT JOIN simba_leases l ON l.name = p_name
      LEFT JOIN simba_sessions h ON h.id = l.session_id AND l.session_id <> p_session
                                AND h.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
     WHERE m.one = 1;
    IF v_exp IS NULL OR v_exp <= v_t THEN
        SELECT 'EXPIRED', NULL, NULL, NULL, NULL, NULL, NULL, NULL;
    ELSEIF v_hexp IS NOT NULL THEN
        SELECT 'HELD', v_tok, NULL, NULL, NULL, v_holder, v_ident, v_hexp - v_t;
    ELSEIF v_t < v_guard THEN
        SELECT 'RECOVERING', NULL, NULL, NULL, NULL, NULL, NULL, v_guard - v_t;
    ELSE
    IF v_lname IS NOT NULL AND v_holder IS NULL AND p_grp IS NULL THEN
        -- The common grant, a free record that is not a partition, in four
        -- statements: an UPDATE that locks the session's row and counts the
        -- lease in its digest, if the row is still as the read saw it (else
        -- the general path below decides); the lease's lock, if it is still
        -- free and no other call holds it (SKIP LOCKED); the token, minted
        -- only now; and an UPDATE that grants the lease if the session is
        -- still alive by the clock read after every lock. Each matched row
        -- changes, so ROW_COUNT() counts it whatever CLIENT_FOUND_ROWS says.
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        UPDATE simba_sessions SET leases = leases + 1, version = version + 1
         WHERE id = p_session AND expires_us = v_exp AND version = v_ver;
        IF ROW_COUNT() = 1 THEN
            SET v_lname = NULL;
            SELECT name, token, value INTO v_lname, v_tok, v_val
              FROM simba_leases WHERE name = p_name AND session_id IS NULL FOR UPDATE SKIP LOCKED;
            IF v_lname IS NOT NULL THEN
                UPDATE simba_seq SET v = LAST_INSERT_ID(GREATEST(v + 1, v_tok + 1, CAST(@@timestamp * 1000000 AS SIGNED)))
                 WHERE id = 1;
                UPDATE simba_leases SET session_id = p_session, token = LAST_INSERT_ID()
                 WHERE name = p_name AND v_exp > CAST(@@timestamp * 1000000 AS SIGNED);
                SET v_fast = ROW_COUNT() = 1, v_tok = LAST_INSERT_ID();
            END IF;
        END IF;
        IF v_fast THEN
            COMMIT;
        ELSE
            ROLLBACK;
            SET v_lname = p_name; -- the record exists
        END IF;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    END IF;
    IF v_fast THEN
        SELECT 'OK', v_tok, v_val, v_n + 1, v_ver + 1, NULL, NULL, NULL;
    ELSE
    SET v_val = NULL, v_tok = NULL, v_hexp = NULL, v_ident = NULL, v_exp = NULL, v_holder = NULL, v_t = NULL;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT expires_us, leases, version INTO v_exp, v_n, v_ver FROM simba_sessions WHERE id = p_session FOR UPDATE;
    IF v_exp IS NOT NULL THEN
        IF v_lname IS NULL THEN
            -- The first term of the name: create its record. ON DUPLICATE KEY
            -- UPDATE, not INSERT IGNORE: a duplicate takes the row's
            -- exclusive lock at once, where IGNORE takes a shared one that
            -- two candidates would both hold and both want to upgrade (a
            -- deadlock).
            INSERT INTO simba_leases (name, grp, part) VALUES (p_name, p_grp, p_part)
                ON DUPLICATE KEY UPDATE name = name;
        END IF;
        -- A record another call holds locked (a competing grant, or its
        -- holder's release) is refused at once, never queued for: so a herd
        -- of candidates woken by one release does not line up, and the
        -- winner's release never waits behind them.
        SET v_lname = NULL;
        SELECT name, session_id, token, value, grp, part INTO v_lname, v_holder, v_tok, v_val, v_grp, v_part
          FROM simba_leases WHERE name = p_name FOR UPDATE SKIP LOCKED;
        IF v_lname IS NULL THEN
            SELECT l.session_id, l.token, h.expires_us, h.identity INTO v_holder, v_tok, v_hexp, v_ident
              FROM simba_leases l LEFT JOIN simba_sessions h ON h.id = l.session_id WHERE l.name = p_name;
            SET v_t = CAST(@@timestamp * 1000000 AS SIGNED);
            SET v_status = 'BUSY', v_hexp = GREATEST(COALESCE(v_hexp, v_t), v_t);
        END IF;
    END IF;
    IF v_status = 'BUSY' THEN
        SET v_status = 'HELD';
    ELSEIF v_exp IS NULL OR v_exp <= CAST(@@timestamp * 1000000 AS SIGNED) THEN
        SET v_status = 'EXPIRED';
    ELSEIF v_holder = p_session THEN
        SET v_status = 'SAME'; -- a retry: the same term
    ELSEIF v_holder IS NOT NULL THEN
        SELECT id, expires_us, identity INTO v_taken, v_hexp, v_ident
          FROM simba_sessions WHERE id = v_holder FOR UPDATE SKIP LOCKED;
        SET v_t = CAST(@@timestamp * 1000000 AS SIGNED); -- after the lock: the holder's expiry is final
        IF v_taken IS NULL THEN
            -- Busy (locked by its own call, or a reaper), or gone.
            SELECT expires_us, identity INTO v_hexp, v_ident FROM simba_sessions WHERE id = v_holder;
            IF v_hexp IS NULL THEN
                SET v_holder = NULL; -- its row is gone: the record is stale, and free
            ELSE
                -- Alive, whatever the expiry its row had before: the call
                -- that holds the row may be its keep-alive, which read the
                -- clock before that expiry and is renewing it. Never judged
                -- against the clock here: the lease is not taken from a
                -- session whose row this call has not locked.
                SET v_status = 'HELD', v_hexp = GREATEST(v_hexp, v_t + 1);
            END IF;
        ELSEIF v_hexp > v_t THEN
            SET v_status = 'HELD', v_taken = NULL;
        END IF;
    END IF;
    IF v_status = 'OK' THEN
        UPDATE simba_seq SET v = LAST_INSERT_ID(GREATEST(v + 1, v_tok + 1, CAST(@@timestamp * 1000000 AS SIGNED)))
         WHERE id = 1;
        SET v_t = CAST(@@timestamp * 1000000 AS SIGNED); -- after the locks: the row's expiry is final
        IF v_exp <= v_t THEN
            SET v_status = 'EXPIRED'; -- while this call waited
        ELSE
            -- Two single-table UPDATEs (both rows are locked already): a
            -- multi-table UPDATE costs MariaDB a temporary table per call.
            UPDATE simba_leases SET session_id = p_session, token = LAST_INSERT_ID() WHERE name = p_name;
            UPDATE simba_sessions SET leases = leases + 1, version = version + 1 WHERE id = p_session;
            SET v_tok = LAST_INSERT_ID(), v_n = v_n + 1, v_ver = v_ver + 1;
            IF v_taken IS NOT NULL THEN
                SET v_budget = 1000;
                CALL simba_end_session(v_taken, v_budget, v_done);
            END IF;
            IF v_grp IS NOT NULL THEN
                SELECT v + 1 INTO v_seq FROM simba_seq WHERE id = 3 FOR UPDATE;
                UPDATE simba_seq SET v = v_seq WHERE id = 3;
                UPDATE simba_groups SET epoch = v_seq WHERE name = v_grp AND v_part < partitions;
            END IF;
        END IF;
    END IF;
    IF v_status = 'OK' THEN
        COMMIT;
    ELSE
        ROLLBACK;
    END IF;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    CASE v_status
    WHEN 'OK' THEN SELECT 'OK', v_tok, v_val, v_n, v_ver, NULL, NULL, NULL;
    WHEN 'SAME' THEN SELECT 'OK', v_tok, v_val, v_n, v_ver, NULL, NULL, NULL;
    WHEN 'HELD' THEN SELECT 'HELD', v_tok, NULL, NULL, NULL, v_holder, v_ident, v_hexp - v_t;
    WHEN 'RECOVERING' THEN SELECT 'RECOVERING', NULL, NULL, NULL, NULL, NULL, NULL, v_guard - v_t;
    ELSE SELECT 'EXPIRED', NULL, NULL, NULL, NULL, NULL, NULL, NULL;
    END CASE;
    END IF;
    END IF;
END//

-- simba_release gives lease p_name up if the session holds it with token
-- p_token, numbering the release with the clock in microseconds for the poll
-- of notifications: an UPDATE of the session's row (its lock first, and the
-- count in its digest), an UPDATE that frees the lease record, and the
-- commit. A partition (whose group's epoch moves too), or a release that
-- frees nothing, takes the general path: a transaction whose locking read
-- takes both rows, then decides. A session that expired while
-- the read waited may still free its own lease: only its holder with its
-- token can, and freeing is what it asked.
DROP PROCEDURE IF EXISTS simba_release//
CREATE PROCEDURE simba_release(IN p_session VARBINARY(32), IN p_name VARBINARY(128), IN p_token BIGINT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_t, v_exp, v_ver, v_tok, v_seq BIGINT;
    DECLARE v_n, v_part INT;
    DECLARE v_holder VARBINARY(32);
    DECLARE v_grp VARBINARY(128);
    DECLARE v_done BOOLEAN DEFAULT FALSE;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    -- The common case, a lease that is not a partition, in two single-row
    -- UPDATEs: the first locks the session's row and counts the release in
    -- its digest if the session is alive, the second frees the lease only if
    -- this session holds it with this token. Every matched row changes, so
    -- ROW_COUNT() counts them whatever the connection's CLIENT_FOUND_ROWS.
    UPDATE simba_sessions SET leases = leases - 1, version = version + 1
     WHERE id = p_session AND expires_us > CAST(@@timestamp * 1000000 AS SIGNED);
    IF ROW_COUNT() > 0 THEN
        UPDATE simba_leases SET session_id = NULL, rel = CAST(@@timestamp * 1000000 AS SIGNED), released_by = p_session
         WHERE name = p_name AND session_id = p_session AND token = p_token AND grp IS NULL;
        SET v_done = ROW_COUNT() > 0;
    END IF;
    IF v_done THEN
        SELECT leases, version INTO v_n, v_ver FROM simba_sessions WHERE id = p_session;
        COMMIT;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        SELECT 'OK', v_n, v_ver;
    ELSE
    ROLLBACK;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT o.expires_us, o.leases, o.version, l.session_id, l.token, l.grp, l.part, CAST(@@timestamp * 1000000 AS SIGNED)
      INTO v_exp, v_n, v_ver, v_holder, v_tok, v_grp, v_part, v_t
      FROM simba_sessions o STRAIGHT_JOIN simba_leases l
     WHERE o.id = p_session AND l.name = p_name FOR UPDATE;
    IF v_exp IS NULL THEN
        -- No such session, or no such lease: which?
        SELECT o.expires_us, o.leases, o.version, CAST(@@timestamp * 1000000 AS SIGNED) INTO v_exp, v_n, v_ver, v_t
          FROM simba_sessions o WHERE o.id = p_session;
    END IF;
    IF v_exp IS NULL OR v_exp <= v_t THEN
        COMMIT;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        SELECT 'EXPIRED', NULL, NULL;
    ELSE
        IF v_holder = p_session AND v_tok = p_token THEN
            UPDATE simba_leases SET session_id = NULL, rel = CAST(@@timestamp * 1000000 AS SIGNED), released_by = p_session
             WHERE name = p_name;
            UPDATE simba_sessions SET leases = leases - 1, version = version + 1 WHERE id = p_session;
            SET v_n = v_n - 1, v_ver = v_ver + 1;
            IF v_grp IS NOT NULL THEN
                SELECT v + 1 INTO v_seq FROM simba_seq WHERE id = 3 FOR UPDATE;
                UPDATE simba_seq SET v = v_seq WHERE id = 3;
                UPDATE simba_groups SET epoch = v_seq WHERE name = v_grp AND v_part < partitions;
            END IF;
        END IF;
        COMMIT;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        SELECT 'OK', v_n, v_ver;
    END IF;
    END IF;
END//

-- simba_holder says who holds lease p_name: a live session, or nobody.
DROP PROCEDURE IF EXISTS simba_holder//
CREATE PROCEDURE simba_holder(IN p_session VARBINARY(32), IN p_name VARBINARY(128))
READS SQL DATA
BEGIN
    SELECT IF(o.id IS NULL, 'EXPIRED', 'OK'), h.id, h.identity, l.token,
           h.expires_us - CAST(@@timestamp * 1000000 AS SIGNED)
      FROM (SELECT 1) one
      LEFT JOIN simba_sessions o ON o.id = p_session AND o.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
      LEFT JOIN simba_leases l ON l.name = p_name AND o.id IS NOT NULL
      LEFT JOIN simba_sessions h ON h.id = l.session_id AND h.expires_us > CAST(@@timestamp * 1000000 AS SIGNED);
END//

-- simba_put_value stores p_value with lease p_name if the session holds it
-- with token p_token. A shared lock on its own row keeps the session from
-- ending meanwhile.
DROP PROCEDURE IF EXISTS simba_put_value//
CREATE PROCEDURE simba_put_value(IN p_session VARBINARY(32), IN p_name VARBINARY(128), IN p_token BIGINT,
    IN p_value VARBINARY(4096))
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_exp, v_tok BIGINT;
    DECLARE v_holder VARBINARY(32);
    DECLARE v_status VARCHAR(16) DEFAULT 'NOTHOLDER';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT expires_us INTO v_exp FROM simba_sessions WHERE id = p_session LOCK IN SHARE MODE;
    IF v_exp IS NULL OR v_exp <= CAST(@@timestamp * 1000000 AS SIGNED) THEN
        SET v_status = 'EXPIRED';
    ELSE
        SELECT session_id, token INTO v_holder, v_tok FROM simba_leases WHERE name = p_name FOR UPDATE;
        IF v_holder = p_session AND v_tok = p_token THEN
            UPDATE simba_leases SET value = p_value WHERE name = p_name;
            SET v_status = 'OK';
        END IF;
    END IF;
    COMMIT;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    SELECT v_status;
END//

-- simba_join makes the session a member of group p_group of p_parts
-- partitions. It first ends up to 16 of the group's members whose sessions
-- expired (as simba_reap does), then locks the group's row (creating it),
-- then checks the count.
DROP PROCEDURE IF EXISTS simba_join//
CREATE PROCEDURE simba_join(IN p_session VARBINARY(32), IN p_group VARBINARY(128), IN p_parts INT)
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_t, v_exp, v_rev BIGINT;
    DECLARE v_parts, v_i, v_budget INT;
    DECLARE v_id, v_locked VARBINARY(32);
    DECLARE v_created, v_done BOOLEAN DEFAULT FALSE;
    DECLARE v_status VARCHAR(16) DEFAULT 'OK';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT expires_us INTO v_exp FROM simba_sessions WHERE id = p_session LOCK IN SHARE MODE;
    SET v_t = CAST(@@timestamp * 1000000 AS SIGNED);
    IF v_exp IS NULL OR v_exp <= v_t THEN
        SET v_status = 'EXPIRED';
    ELSE
        SET v_i = 0, v_budget = 1000;
        pruning: WHILE v_i < 16 AND v_budget > 0 DO
            SET v_id = NULL, v_locked = NULL, v_i = v_i + 1;
            SELECT s.id INTO v_id FROM simba_members m JOIN simba_sessions s ON s.id = m.session_id
             WHERE m.grp = p_group AND s.expires_us < v_t ORDER BY s.expires_us, s.id LIMIT 1;
            IF v_id IS NULL THEN
                LEAVE pruning;
            END IF;
            SELECT id INTO v_locked FROM simba_sessions WHERE id = v_id AND expires_us < v_t FOR UPDATE SKIP LOCKED;
            IF v_locked IS NULL THEN
                LEAVE pruning; -- a reaper is at it
            END IF;
            CALL simba_end_session(v_locked, v_budget, v_done);
        END WHILE;
        SELECT partitions INTO v_parts FROM simba_groups WHERE name = p_group FOR UPDATE;
        IF v_parts IS NULL THEN
            -- Create it, or lock it if another join just did (exclusively
            -- at once: see simba_acquire); created if it bears this call's
            -- revision.
            SELECT v + 1 INTO v_rev FROM simba_seq WHERE id = 3 FOR UPDATE;
            UPDATE simba_seq SET v = v_rev WHERE id = 3;
            INSERT INTO simba_groups (name, partitions, epoch) VALUES (p_group, p_parts, v_rev)
                ON DUPLICATE KEY UPDATE name = name;
            SELECT partitions, epoch = v_rev INTO v_parts, v_created FROM simba_groups WHERE name = p_group FOR UPDATE;
        END IF;
        IF v_parts <> p_parts THEN
            SET v_status = 'MISMATCH';
        ELSE
            INSERT IGNORE INTO simba_members (grp, session_id) VALUES (p_group, p_session);
            IF ROW_COUNT() = 1 AND NOT v_created THEN
                SELECT v + 1 INTO v_rev FROM simba_seq WHERE id = 3 FOR UPDATE;
                UPDATE simba_seq SET v = v_rev WHERE id = 3;
                UPDATE simba_groups SET epoch = v_rev WHERE name = p_group;
            END IF;
        END IF;
    END IF;
    COMMIT;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    SELECT v_status, v_parts;
END//

-- simba_leave ends the session's membership of p_group.
DROP PROCEDURE IF EXISTS simba_leave//
CREATE PROCEDURE simba_leave(IN p_session VARBINARY(32), IN p_group VARBINARY(128))
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_exp, v_rev BIGINT;
    DECLARE v_parts INT;
    DECLARE v_status VARCHAR(16) DEFAULT 'OK';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT expires_us INTO v_exp FROM simba_sessions WHERE id = p_session FOR UPDATE;
    IF v_exp IS NULL OR v_exp <= CAST(@@timestamp * 1000000 AS SIGNED) THEN
        SET v_status = 'EXPIRED';
    ELSE
        SELECT partitions INTO v_parts FROM simba_groups WHERE name = p_group FOR UPDATE;
        DELETE FROM simba_members WHERE grp = p_group AND session_id = p_session;
        IF ROW_COUNT() > 0 THEN
            SELECT v + 1 INTO v_rev FROM simba_seq WHERE id = 3 FOR UPDATE;
            UPDATE simba_seq SET v = v_rev WHERE id = 3;
            UPDATE simba_groups SET epoch = v_rev WHERE name = p_group;
            DELETE FROM simba_groups
             WHERE name = p_group AND NOT EXISTS (SELECT 1 FROM simba_members m WHERE m.grp = p_group);
            UPDATE simba_sessions SET left_rev = v_rev WHERE id = p_session;
        END IF;
    END IF;
    COMMIT;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    SELECT v_status;
END//

-- simba_members lists the live members of p_group and the live holders of
-- its partitions, in one statement (one snapshot): a row ('G', NULL,
-- partitions) first, then ('M', member, 0) per live member and ('H', holder,
-- index) per held partition; no row if the session is not alive, and only
-- the 'G' row, with 0 partitions, for a group without live members.
DROP PROCEDURE IF EXISTS simba_members//
CREATE PROCEDURE simba_members(IN p_session VARBINARY(32), IN p_group VARBINARY(128))
READS SQL DATA
BEGIN
    SELECT 'G' AS k, NULL AS id, COALESCE(MAX(g.partitions), 0) AS n
      FROM simba_sessions o LEFT JOIN simba_groups g ON g.name = p_group
     WHERE o.id = p_session AND o.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
     GROUP BY o.id
    UNION ALL
    SELECT 'M', m.session_id, 0
      FROM simba_members m JOIN simba_sessions s ON s.id = m.session_id
     WHERE m.grp = p_group AND s.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
    UNION ALL
    SELECT 'H', l.session_id, l.part
      FROM simba_leases l JOIN simba_sessions s ON s.id = l.session_id JOIN simba_groups g ON g.name = l.grp
     WHERE l.grp = p_group AND l.part < g.partitions AND s.expires_us > CAST(@@timestamp * 1000000 AS SIGNED)
    ORDER BY k, id;
END//

-- simba_close ends the session at once, and releases up to 1,000 of its
-- leases and memberships: MORE means call again to go on (other sessions'
-- reaping would finish it too).
DROP PROCEDURE IF EXISTS simba_close//
CREATE PROCEDURE simba_close(IN p_session VARBINARY(32))
MODIFIES SQL DATA
BEGIN
    DECLARE v_wait BIGINT DEFAULT @@session.innodb_lock_wait_timeout;
    DECLARE v_id VARBINARY(32);
    DECLARE v_budget INT DEFAULT 1000;
    DECLARE v_done BOOLEAN DEFAULT TRUE;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
        RESIGNAL;
    END;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = 1; END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT id INTO v_id FROM simba_sessions WHERE id = p_session FOR UPDATE;
    IF v_id IS NOT NULL THEN
        CALL simba_end_session(p_session, v_budget, v_done);
    END IF;
    COMMIT;
    IF v_wait > 1 THEN SET SESSION innodb_lock_wait_timeout = v_wait; END IF;
    SELECT IF(v_done, 'OK', 'MORE');
END//

-- simba_poll lists the releases numbered after p_after, in one statement
-- (one snapshot): a row ('S', NULL, NULL, now) with the database clock in
-- microseconds, then ('R', name, released_by, rel) per lease whose last
-- release is numbered after p_after, at most 2,000 in number order; only the
-- 'S' row if p_after is negative. Candidates' backends poll it while they
-- wait. A release is numbered with the clock when its transaction ran, and
-- may commit a moment later: pollers read again a window before their last
-- poll.
DROP PROCEDURE IF EXISTS simba_poll//
CREATE PROCEDURE simba_poll(IN p_after BIGINT)
READS SQL DATA
BEGIN
    SELECT 'S' AS k, NULL AS name, NULL AS released_by, CAST(@@timestamp * 1000000 AS SIGNED) AS rel
    UNION ALL
    (SELECT 'R', name, released_by, rel FROM simba_leases WHERE p_after >= 0 AND rel > p_after ORDER BY rel LIMIT 2000);
END//

-- simba_start_guard starts the amnesia guard by hand, for an event the
-- tables cannot see (a restore of older contents, a fail-over to a replica
-- that missed writes): every session ends (the reapers release what they
-- held), no lease is granted until MaxLease from now, and tokens continue
-- from the clock in microseconds, or above the highest recorded, whichever
-- is more. Values are kept. Grant EXECUTE on it to nobody but the owner.
DROP PROCEDURE IF EXISTS simba_start_guard//
CREATE PROCEDURE simba_start_guard()
MODIFIES SQL DATA
BEGIN
    DECLARE v_t BIGINT;
    DECLARE v_one TINYINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SELECT one INTO v_one FROM simba_meta WHERE one = 1 FOR UPDATE;
    SET v_t = CAST(@@timestamp * 1000000 AS SIGNED);
    UPDATE simba_meta SET guard_from_us = v_t WHERE one = 1;
    UPDATE simba_sessions SET expires_us = 0 WHERE expires_us <> 0;
    UPDATE simba_seq SET v = GREATEST(v, v_t, (SELECT COALESCE(MAX(token), 0) FROM simba_leases)) WHERE id = 1;
    COMMIT;
    SELECT v_t;
END//

DELIMITER ;

-- The revision of the routines of this file. The tables and the procedures'
-- signatures are those of version 1 in every revision, so that code of one
-- revision works with the routines of another: the backend runs this file
-- again on first use when it finds an older revision.
UPDATE simba_meta SET routines = 4 WHERE one = 1 AND routines < 4;
