package simbaetcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url       string
		endpoints string
		prefix    string
		maxLease  time.Duration
		clock     bool
		tls       bool
		user      string
	}{
		{url: "etcd://127.0.0.1:2379", endpoints: "127.0.0.1:2379", prefix: DefaultPrefix},
		{url: "etcd://h1,h2:2380/billing", endpoints: "h1:2379,h2:2380", prefix: "/billing"},
		{url: "etcd://u:p%40ss@h1:2379/a/b/?simba_max_lease=5s&simba_clock=local", endpoints: "h1:2379", prefix: "/a/b/",
			maxLease: 5 * time.Second, clock: true, user: "u"},
		{url: "ETCD://[::1]:2379/x?simba_tls=true", endpoints: "[::1]:2379", prefix: "/x", tls: true},
	} {
		eps, opts, err := parseURL(tc.url)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.url, err)
			continue
		}
		o := options{prefix: DefaultPrefix}
		for _, opt := range opts {
			opt(&o)
		}
		if got := strings.Join(eps, ","); got != tc.endpoints {
			t.Errorf("parseURL(%q) endpoints = %s; want %s", tc.url, got, tc.endpoints)
		}
		if o.prefix != tc.prefix || o.clock != tc.clock || (o.client.tls != nil) != tc.tls || o.client.user != tc.user ||
			(tc.maxLease != 0 && o.maxLease != tc.maxLease) {
			t.Errorf("parseURL(%q) options = %+v; want prefix %q, clock %v, TLS %v, user %q, max lease %v",
				tc.url, o, tc.prefix, tc.clock, tc.tls, tc.user, tc.maxLease)
		}
		if tc.user != "" && o.client.password != "p@ss" {
			t.Errorf("parseURL(%q) password not unescaped", tc.url)
		}
	}
}

// Every bad URL is refused before anything is dialled, with an error that
// names the part at fault and never shows the password.
func TestOpenBadURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"etcd://", "no endpoints"},
		{"etcd://user@h1:2379/x", "user:password@"},
		{"etcd://u:s3cret@h1:2379/x?simba_max_lease=soon", "simba_max_lease"},
		{"etcd://u:s3cret@h1:2379/x?simba_clock=ntp", "simba_clock"},
		{"etcd://u:s3cret@h1:2379/x?password=s3cret", "unknown option"},
		{"etcd://u:s3cret@h1:2379/x?simba_tls_cert=/nonexistent", "simba_tls_key"},
		{"etcd://u:s3cret@h1:2379/x?simba_tls_ca=/nonexistent/ca.pem", "simba_tls_ca"},
		{"etcd://u:s3cret@h1:2379/x#frag", "fragment"},
		{"etcd://u:s3cret@h1:2379/x?simba_max_lease=500ms", "at least 1s"},
	} {
		_, err := Open(context.Background(), tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want an error naming %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v: shows the password", tc.url, err)
		}
	}
}

// backendurl opens etcd:// through this package's registration, with the
// local clock when the URL asks for it, and a closed backend refuses calls.
func TestBackendURL(t *testing.T) {
	s := shared.get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := "/" + unique("simbatest-url")
	b, c, err := backendurl.Open(ctx, "etcd://"+s.client+prefix+"?simba_clock=local&simba_max_lease=2s")
	if err != nil {
		t.Fatalf("backendurl.Open: %v", err)
	}
	if _, ok := b.(backends.StoreClock); !ok {
		t.Errorf("backend %T has no StoreClock; want one with simba_clock=local", b)
	}
	if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 2 * time.Second}); err != nil {
		t.Errorf("OpenSession: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 2 * time.Second}); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("OpenSession after Close = %v; want ErrClosed", err)
	}
	in, c2, err := backendurl.OpenInspector(ctx, "etcd://"+s.client+prefix)
	if err != nil {
		t.Fatalf("OpenInspector: %v", err)
	}
	defer c2.Close()
	if _, ok := in.(backends.StoreClock); ok {
		t.Errorf("inspector %T has a StoreClock without simba_clock=local", in)
	}
	if inv, err := in.Inspect(ctx); err != nil || len(inv.Sessions) != 0 {
		t.Errorf("Inspect = %+v, %v; want no sessions (the only one was revoked by Close)", inv, err)
	}
	cli := newClient(t, nil, s)
	cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
}
