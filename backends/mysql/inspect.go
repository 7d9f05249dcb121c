package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/backends"
)

// inspectPage is how many rows Inspect reads per statement, so that no
// statement holds the database for long however much the tables hold.
const inspectPage = 1000

// Inspect lists the prefix's live sessions, the leases they hold and the
// groups with live members ([backends.Inspector]), in pages of 1,000 rows per
// SELECT. It writes nothing — no procedure runs, nothing is reaped — so
// that a status tool leaves the tables as they were; the user needs SELECT
// on them. The lists are read close together, not as one snapshot. Tables
// that do not exist yet list as empty under [WithReadOnly].
func (b *Backend) Inspect(ctx context.Context) (backends.Inventory, error) {
	var inv backends.Inventory
	if b.closed.Load() {
		return inv, b.errorf("inspect", "", "%w", backends.ErrClosed)
	}
	if err := b.ensureSchema(ctx); err != nil {
		if b.readOnly && errors.Is(err, ErrNoSchema) {
			inv.StoreTime, err = b.StoreTime(ctx)
			return inv, err
		}
		return inv, err
	}
	p := b.prefix
	now := "CAST(@@timestamp * 1000000 AS SIGNED)"
	var err error
	inv.Sessions, err = pages(ctx, b,
		"SELECT id, identity, expires_us - "+now+", leases, "+now+" FROM "+p+"_sessions WHERE id > %s AND expires_us > "+now+" ORDER BY id LIMIT %d",
		func(rows *sql.Rows) (backends.SessionInfo, string, error) {
			var (
				s             backends.SessionInfo
				id            string
				identity      []byte
				left, storeUS int64
				leases        int64
			)
			err := rows.Scan(&id, &identity, &left, &leases, &storeUS)
			s.ID, s.Identity, s.Remaining, s.Leases = backends.SessionID(id), string(identity), max(0, time.Duration(left)*time.Microsecond), int(leases)
			if inv.StoreTime.IsZero() {
				inv.StoreTime = time.UnixMicro(storeUS).UTC()
			}
			return s, id, err
		})
	if err != nil {
		return inv, err
	}
	if inv.StoreTime.IsZero() {
		if inv.StoreTime, err = b.StoreTime(ctx); err != nil {
			return inv, err
		}
	}
	// The amnesia guard: no lease is granted before guard_from + MaxLease,
	// with this backend's MaxLease, on the database's clock.
	var leftUS int64
	if err := b.retry(ctx, "inspect", "", func() error {
		return scanRow(ctx, b.db, "SELECT guard_from_us + "+strconv.FormatInt(b.maxLease.Microseconds(), 10)+" - "+now+
			" FROM "+p+"_meta WHERE one = 1", &leftUS)
	}); err != nil {
		return inv, err
	}
	if left := time.Duration(leftUS) * time.Microsecond; left > 0 {
		inv.Recovering = b.recovering(left)
		inv.Recovering.Until = inv.StoreTime.Add(left)
	}
	inv.Leases, err = pages(ctx, b,
		"SELECT l.name, l.session_id, s.identity, l.token, l.value FROM "+p+"_leases l JOIN "+p+"_sessions s ON s.id = l.session_id "+
			"WHERE l.name > %s AND s.expires_us > "+now+" ORDER BY l.name LIMIT %d",
		func(rows *sql.Rows) (backends.LeaseInfo, string, error) {
			var (
				l        backends.LeaseInfo
				holder   string
				identity []byte
				tok      int64
			)
			err := rows.Scan(&l.Name, &holder, &identity, &tok, &l.Value)
			l.Session, l.Identity, l.Token = backends.SessionID(holder), string(identity), backends.Token(tok)
			return l, l.Name, err
		})
	if err != nil {
		return inv, err
	}
	inv.Groups, err = pages(ctx, b,
		"SELECT /*+ SET_VAR(group_concat_max_len = 4194304) */ g.name, g.partitions, GROUP_CONCAT(m.session_id ORDER BY m.session_id SEPARATOR ',') FROM "+p+"_groups g "+
			"JOIN "+p+"_members m ON m.grp = g.name JOIN "+p+"_sessions s ON s.id = m.session_id "+
			"WHERE g.name > %s AND s.expires_us > "+now+" GROUP BY g.name, g.partitions ORDER BY g.name LIMIT %d",
		func(rows *sql.Rows) (backends.GroupInfo, string, error) {
			var (
				g       backends.GroupInfo
				parts   int64
				members sql.NullString
			)
			err := rows.Scan(&g.Name, &parts, &members)
			g.Partitions = int(parts)
			if members.String != "" {
				for m := range strings.SplitSeq(members.String, ",") {
					g.Members = append(g.Members, backends.SessionID(m))
				}
			}
			return g, g.Name, err
		})
	return inv, err
}

// pages reads every page of one of the listing SELECTs, formats with the
// key (id or name) to start after, as a hexadecimal literal, and a page size;
// scan reads one row and returns its key. The SELECTs are sent as text with
// their arguments written in, as the backend's calls are (see callSQL): no
// prepared statement to close on a silent link.
func pages[T any](ctx context.Context, b *Backend, query string, scan func(*sql.Rows) (T, string, error)) ([]T, error) {
	var all []T
	for after := ""; ; {
		var (
			page []T
			last string
		)
		err := b.retry(ctx, "inspect", "", func() error {
			page, last = page[:0], after
			rows, err := b.db.QueryContext(ctx, fmt.Sprintf(query, appendHex(nil, []byte(after)), inspectPage))
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				item, key, err := scan(rows)
				if err != nil {
					return err
				}
				page, last = append(page, item), key
			}
			return readToEnd(rows)
		})
		if err != nil {
			if missing(err) {
				b.ready.Store(false)
				err = b.errorf("inspect", "", "the tables of prefix %s are gone: %w", b.prefix, err)
			}
			return all, err
		}
		all = append(all, page...)
		if len(page) < inspectPage {
			return all, nil
		}
		after = last
	}
}
