package simbamysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The migration refuses what it cannot use, with an error that says what
// and what to do: tables of a newer version, a prefix whose tables are not
// Simba's, tables in another engine than InnoDB; under WithoutMigration,
// missing tables are ErrNoSchema. Procedures of an older revision are
// replaced in place, and the sessions of the tables go on.
func TestMigrate(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	ctx := testCtx(t)
	again := func(b *Backend, opts ...Option) error {
		nb := samePrefix(t, b, newDB(t, url, nil), opts...)
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if len(opts) > 0 {
			_, err := nb.Inspect(c)
			return err
		}
		return nb.Migrate(c)
	}

	t.Run("newer version", func(t *testing.T) {
		b := newBackend(t, newDB(t, url, nil), admin)
		mustExec(t, admin, "UPDATE "+b.Prefix()+"_meta SET version = 2")
		if err := again(b); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "version 2, newer") {
			t.Errorf("Migrate on tables of version 2 = %v; want ErrSchema naming the version", err)
		}
	})
	t.Run("foreign tables", func(t *testing.T) {
		prefix := uniquePrefix()
		t.Cleanup(func() { dropTables(t, admin, prefix) })
		mustExec(t, admin, "CREATE TABLE "+prefix+"_leases (x INT) ENGINE=InnoDB")
		b, err := New(newDB(t, url, nil), WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Migrate(ctx); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), prefix+"_leases") {
			t.Errorf("Migrate over a foreign table = %v; want ErrSchema naming it", err)
		}
	})
	t.Run("another engine", func(t *testing.T) {
		b := newBackend(t, newDB(t, url, nil), admin)
		mustExec(t, admin, "ALTER TABLE "+b.Prefix()+"_members ENGINE=MyISAM")
		err := again(b)
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "MyISAM") || !strings.Contains(err.Error(), "InnoDB") {
			t.Errorf("Migrate with a MyISAM table = %v; want ErrSchema naming the engine and InnoDB", err)
		}
	})
	t.Run("older routines", func(t *testing.T) {
		b := newBackend(t, newDB(t, url, nil), admin)
		s := mustOpen(t, b, time.Minute)
		g, err := s.Acquire(ctx, "kept")
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, admin, "UPDATE "+b.Prefix()+"_meta SET routines = 0")
		if err := again(b); err != nil {
			t.Fatalf("Migrate over routines of revision 0: %v", err)
		}
		var rev int
		if err := admin.QueryRowContext(ctx, "SELECT routines FROM "+b.Prefix()+"_meta").Scan(&rev); err != nil || rev != routinesRevision {
			t.Errorf("routines revision after the migration = %d, %v; want %d", rev, err, routinesRevision)
		}
		if _, err := s.KeepAlive(ctx); err != nil {
			t.Errorf("KeepAlive after the procedures were replaced: %v", err)
		}
		if g2, err := s.Acquire(ctx, "kept"); err != nil || g2.Token != g.Token {
			t.Errorf("Acquire after the procedures were replaced = %+v, %v; want the same term", g2, err)
		}
	})
	t.Run("without migration", func(t *testing.T) {
		b, err := New(newDB(t, url, nil), WithPrefix(uniquePrefix()), WithoutMigration())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.Inspect(ctx); !errors.Is(err, ErrNoSchema) || !strings.Contains(err.Error(), "schema.sql") {
			t.Errorf("Inspect without tables, WithoutMigration = %v; want ErrNoSchema naming the SQL file", err)
		}
	})
}

// Bad options are refused with the option, its value and the expected form.
func TestOptions(t *testing.T) {
	db := newDB(t, "mysql://root@127.0.0.1:1/x", nil)
	for _, tt := range []struct {
		opt  Option
		want string
	}{
		{WithPrefix(""), "WithPrefix"},
		{WithPrefix("1abc"), "want a letter"},
		{WithPrefix(strings.Repeat("a", 41)), "1 to 40"},
		{WithMaxLease(time.Microsecond), "WithMaxLease(1µs): want at least 1ms"},
		{WithPollInterval(time.Microsecond), "WithPollInterval(1µs): want 0 (no polling) or at least 1ms"},
	} {
		if _, err := New(db, tt.opt); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New = %v; want an error containing %q", err, tt.want)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}
