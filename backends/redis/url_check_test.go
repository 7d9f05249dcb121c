package simbaredis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"testing"

	"github.com/simba-go/simba/backends/backendurl"
	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// §12: every part of a redis://, rediss:// or unix:// URL is checked before
// anything dials, whatever the scheme's case, and the error names the part
// and the form expected, without a byte of the password.
func TestURLCheckedBeforeDial(t *testing.T) {
	l := noDial(t)
	for _, tt := range []struct{ url, want string }{
		{"redis://:s3cret@" + l + "/-1", `database "-1": want a number, 0 or more`},
		{"REDIS://:s3cret@" + l + "/-1", `database "-1": want a number, 0 or more`},
		{"rediss://:s3cret@" + l + "/first", `database "first": want a number, 0 or more`},
		{"redis://:s3cret@" + l + "/0/1", `path /0/1: want /DB, a database number`},
		{"redis://:s3cret@" + l + "/0?db=-2", `db="-2": want a database number, 0 or more`},
		{"redis://:s3cret@127.0.0.1:99999/0", `port "99999": want a number from 1 to 65535`},
		{"redis://:s3cret@127.0.0.1:0/0", `port "0": want a number from 1 to 65535`},
		{"redis://:s3cret@127.0.0.1:redis/0", `port "redis": want a number from 1 to 65535`},
		{"redis://:s3cret@127.0.0.1:/0", `port "": want a number from 1 to 65535`},
		{"redis://:s3cret@:6379/0", `the URL names no host; want redis://host[:port][/db]`},
		{"rediss://:s3cret@/0", `the URL names no host; want rediss://host[:port][/db]`},
		{"redis://:s3cret@[::1/0", `host "[::1": an IPv6 address wants its closing ]`},
		{"redis://:s3cret@::1:6379/0", `host "::1:6379": write an IPv6 address in brackets, such as [::1]:6379`},
		{"unix://:s3cret@", `the URL names no socket; want unix:///path/to/redis.sock`},
		{"redis://:s3cret@" + l + "/0?simba_max_lease=soon", `simba_max_lease="soon": want a duration of at least 1ms, such as 30s`},
		{"redis://:s3cret@" + l + "/0?simba_max_lease=-5s", `simba_max_lease="-5s": want a duration of at least 1ms, such as 30s`},
		{"redis://:s3cret@" + l + "/0?simba_prefix=a%2Fb", `simba_prefix="a/b": want 1 to 64 characters of [A-Za-z0-9._:-]`},
		{"redis://:s3cret@" + l + "/0?simba_prefixx=a", `unknown option simba_prefixx; want simba_prefix or simba_max_lease`},
		{"redis://:s3cret@" + l + "/0?dial_timeout=soon", `redis: invalid dial_timeout duration: time: invalid duration "soon"`},
		{"redis://:s3cret@" + l + "/0?bogus=1", `redis: unexpected option: bogus`},
		{"redis://:s3cret@" + l + "/0?x=%zz", `the query does not parse; want name=value pairs joined by &, with special characters escaped as %XX`},
		{"redis://:s3cret@" + l + "/0#top", `the URL has a fragment (#…), which means nothing here; escape a # in the password as %23`},
		{"redis://u:s3cr%zzet@" + l + "/0", `the password is not valid URL escaping; write a % in it as %25`},
		{"redis:/" + l, `want a redis://, rediss:// or unix:// URL`},
	} {
		b, c, err := backendurl.Open(context.Background(), tt.url)
		if err == nil {
			c.Close()
			t.Errorf("Open(%s) = %T; want an error", backendurl.Redact(tt.url), b)
			continue
		}
		want := "simbaredis: open " + backendurl.Redact(tt.url) + ": " + tt.want
		if err.Error() != want {
			t.Errorf("Open(%s) error:\n%s\nwant\n%s", backendurl.Redact(tt.url), err, want)
		}
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("Open(%s) error shows the password: %s", backendurl.Redact(tt.url), err)
		}
	}
}

// backendurl lower-cases the scheme to find the backend; Open accepts
// whatever backendurl accepts.
func TestURLSchemeAnyCase(t *testing.T) {
	addr := testservers.Redis(t)
	var r [6]byte
	rand.Read(r[:])
	prefix := "simbatest-case-" + hex.EncodeToString(r[:])
	for _, scheme := range []string{"REDIS", "Redis"} {
		b, c, err := backendurl.Open(context.Background(), scheme+"://"+addr+"/13?simba_prefix="+prefix)
		if err != nil {
			t.Fatalf("Open(%s://…) = %v; want the Redis backend", scheme, err)
		}
		if rb, ok := b.(*simbaredis.Backend); !ok || rb.Prefix() != prefix {
			t.Errorf("Open(%s://…) opened %T; want the Redis backend with prefix %s", scheme, b, prefix)
		}
		c.Close()
	}
	testservers.ClearRedis(t, addr, 13, "{"+prefix+"}:*")
}

// noDial returns the address of a loopback listener that fails the test if
// anything connects to it before the test ends: a URL checked before it is
// dialled never reaches it.
func noDial(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			t.Errorf("something dialled %s, which the URL check should have refused before dialling", ln.Addr())
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}
