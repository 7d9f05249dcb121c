package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
	simbamysql "github.com/simba-go/simba/backends/mysql"
)

// simbaOnMySQL opens a simba row on the MySQL backend, on the shared MariaDB:
// every node a database/sql pool of its own (go-sql-driver's defaults,
// dialling through the node's path) and a backend on it, all on one fresh
// table prefix, with MaxLease the lease, the release poll on (the default,
// every 50 ms) and bells on the node's pool (WithBells, as Open has them).
//
// bells is WithBells' count: 0 for the release poll alone.
func simbaOnMySQL(election bool, bells int) func(ctx context.Context, env *Env) (Target, error) {
	return func(ctx context.Context, env *Env) (Target, error) {
		cfg, err := mysqlConfig(env.MySQLURL)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", MySQLEnv, err)
		}
		if err := reachable("MySQL", cfg.Addr); err != nil {
			return nil, err
		}
		prefix := "b" + strings.ReplaceAll(unique("my"), "-", "_")
		raw := prefix + "_rawpair"
		admin, err := openMySQL(cfg, nil)
		if err != nil {
			return nil, err
		}
		for _, q := range []string{
			"CREATE TABLE " + raw + " (id INT PRIMARY KEY, holder VARCHAR(32) NULL) ENGINE=InnoDB",
			"INSERT INTO " + raw + " VALUES (1, NULL)",
		} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				admin.Close()
				return nil, fmt.Errorf("MySQL: %s: %w", q, err)
			}
		}
		s := simbaStore{
			framing: FramingMySQL,
			newBackend: func(ctx context.Context, nn *NodeNet) (backends.Backend, func(), error) {
				db, err := openMySQL(cfg, nn.Dial)
				if err != nil {
					return nil, nil, err
				}
				b, err := simbamysql.New(db, simbamysql.WithPrefix(prefix), simbamysql.WithMaxLease(Lease),
					simbamysql.WithBells(bells))
				if err != nil {
					db.Close()
					return nil, nil, err
				}
				return b, func() { b.Close(); db.Close() }, nil
			},
			raw: func(ctx context.Context) (func(ctx context.Context) error, func(), error) {
				db, err := openMySQL(cfg, nil)
				if err != nil {
					return nil, nil, err
				}
				db.SetMaxOpenConns(1)
				take := "UPDATE " + raw + " SET holder = ? WHERE id = 1 AND holder IS NULL"
				give := "UPDATE " + raw + " SET holder = NULL WHERE id = 1 AND holder = ?"
				pair := func(ctx context.Context) error {
					for _, q := range []string{take, give} {
						r, err := db.ExecContext(ctx, q, "node")
						if err != nil {
							return err
						}
						if n, _ := r.RowsAffected(); n != 1 {
							return fmt.Errorf("%s: %d rows updated; want 1", q, n)
						}
					}
					return nil
				}
				return pair, func() { db.Close() }, nil
			},
			cleanup: func() error {
				ctx, cancel := context.WithTimeout(context.Background(), callWithin)
				defer cancel()
				defer admin.Close()
				var errs []error
				for _, t := range []string{"meta", "seq", "sessions", "leases", "groups", "members", "rawpair"} {
					if _, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+"_"+t); err != nil {
						errs = append(errs, err)
					}
				}
				rows, err := admin.QueryContext(ctx, "SELECT routine_type, routine_name FROM information_schema.routines "+
					"WHERE routine_schema = DATABASE() AND routine_name LIKE ?", prefix+`\_%`)
				if err != nil {
					return err
				}
				var drops []string
				for rows.Next() {
					var kind, name string
					if rows.Scan(&kind, &name) == nil {
						drops = append(drops, "DROP "+kind+" IF EXISTS "+name)
					}
				}
				rows.Close()
				for _, d := range drops {
					if _, err := admin.ExecContext(ctx, d); err != nil {
						errs = append(errs, err)
					}
				}
				if len(errs) > 0 {
					return errs[0]
				}
				return nil
			},
		}
		return newSimbaTarget(s, election), nil
	}
}

// mysqlConfig reads a mysql://user[:password]@host[:port]/database URL.
func mysqlConfig(raw string) (*mysql.Config, error) {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("want a mysql:// URL")
	}
	cfg := mysql.NewConfig()
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		cfg.User, cfg.Passwd, _ = strings.Cut(rest[:at], ":")
		rest = rest[at+1:]
	}
	host, db, _ := strings.Cut(rest, "/")
	db, _, _ = strings.Cut(db, "?")
	if !strings.Contains(host, ":") {
		host += ":3306"
	}
	if db == "" {
		return nil, fmt.Errorf("the URL names no database")
	}
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", host, db
	cfg.Logger = mysql.Logger(quietMySQL{})
	return cfg, nil
}

type quietMySQL struct{}

func (quietMySQL) Print(...any) {}

// openMySQL opens a pool of cfg that dials with dial (nil: directly).
func openMySQL(cfg *mysql.Config, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*sql.DB, error) {
	c := cfg.Clone()
	if dial != nil {
		c.DialFunc = dial
	}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}
