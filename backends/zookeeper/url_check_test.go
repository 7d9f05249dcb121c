package simbazk_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/backendurl"
	simbazk "github.com/simba-go/simba/backends/zookeeper"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// §12: every part of a zk:// URL is checked before anything dials,
// whatever the scheme's case, and the error names the part and the form
// expected, without a byte of the password.
func TestURLCheckedBeforeDial(t *testing.T) {
	l := noDial(t)
	for _, tt := range []struct{ url, want string }{
		{"zk://u:s3cret@127.0.0.1:99999/x", `server "127.0.0.1:99999": port "99999"; want a number from 1 to 65535`},
		{"zk://u:s3cret@" + l + ",127.0.0.1:zk/x", `server "127.0.0.1:zk": port "zk"; want a number from 1 to 65535`},
		{"zk://u:s3cret@127.0.0.1:/x", `server "127.0.0.1:": port ""; want a number from 1 to 65535`},
		{"zk://u:s3cret@:2181/x", `server ":2181": no host; want host:port`},
		{"zk://u:s3cret@[::1/x", `server "[::1": an IPv6 address wants its closing ]`},
		{"zk://u:s3cret@::1:2181/x", `server "::1:2181": write an IPv6 address in brackets, such as [::1]:2181`},
		{"ZK://u:s3cret@" + l + "/x?bogus=1", `unknown option "bogus"; want simba_max_lease, simba_tick_time or simba_dial_timeout`},
		{"Zk://u:s3cret@" + l + "/x?simba_tick_time=-1s", `option simba_tick_time: want a positive Go duration such as 500ms or 60s`},
		{"zk://u:s3cret@" + l + "/x?simba_max_lease=500us", `option simba_max_lease: want a positive Go duration such as 500ms or 60s`},
		{"zk://u:s3cret@" + l + "/x?simba_dial_timeout=soon", `option simba_dial_timeout: want a positive Go duration such as 500ms or 60s`},
		{"zk://u:s3cret@" + l + "/x#top", `the URL has a fragment (#…), which means nothing here; escape a # in the password as %23`},
		{"zk://u:s3cret@" + l + "/x%zz", `root "/x%zz": not valid URL escaping; write a % in it as %25`},
		{"zk://u:s3cret@" + l + "/zookeeper/x", `simbazk: WithRoot("/zookeeper/x"): /zookeeper is reserved by ZooKeeper`},
		{"zk://s3cret@" + l + "/x", `want digest credentials as user:password@`},
		{"zk://u:s3cr%zzet@" + l + "/x", `the password is not valid URL escaping; write a % in it as %25`},
		{"zk:/" + l + "/x", `want a zk:// URL: zk://[user:password@]host:2181[,host2:2181…][/root]`},
	} {
		b, c, err := backendurl.Open(context.Background(), tt.url)
		if err == nil {
			c.Close()
			t.Errorf("Open(%s) = %T; want an error", backendurl.Redact(tt.url), b)
			continue
		}
		want := "simbazk: open " + backendurl.Redact(tt.url) + ": " + tt.want
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
	servers := testservers.ZooKeeper(t)
	var r [6]byte
	rand.Read(r[:])
	root := "/simbatest-case-" + hex.EncodeToString(r[:])
	for _, scheme := range []string{"ZK", "Zk"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		b, c, err := backendurl.OpenInspector(ctx, scheme+"://"+strings.Join(servers, ",")+root)
		cancel()
		if err != nil {
			t.Fatalf("OpenInspector(%s://…) = %v; want the ZooKeeper backend", scheme, err)
		}
		if zb, ok := b.(*simbazk.Backend); !ok || zb.Root() != root {
			t.Errorf("OpenInspector(%s://…) opened %T; want the ZooKeeper backend with root %s", scheme, b, root)
		}
		c.Close()
	}
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
