package backendurl

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzNoCredentialPrinted: whatever a backend URL holds in its password
// and its query, neither Redact nor any error of Open prints the password.
// The servers are on 127.0.0.1 port 1, where nothing listens: Open fails
// fast, never reaching further than the loopback.
func FuzzNoCredentialPrinted(f *testing.F) {
	for _, s := range []struct{ scheme, user, pass, path, query string }{
		{"redis", "", "s3cretpw", "0", ""},
		{"redis", "user", "p/a#s?s@w0rd", "0", "dial_timeout=3"},
		{"rediss", "u", "s3cr%65tpw", "2", "client_name=x"},
		{"postgres", "simba", "pa ss:word", "simba", "sslmode=disable"},
		{"postgresql", "app", "hunter2hunter2", "x", "simba_max_lease=forever"},
		{"zk", "digest", "zkp4ssw0rd", "simba", "auth=zkp4ssw0rd"},
		{"mysql", "u", "s3cretpw", "x", ""},
		{"memory", "", "s3cretpw", "", ""},
		{"redis", "u", "s3cretpw", "0", "password=s3cretpw"},
	} {
		f.Add(s.scheme, s.user, s.pass, s.path, s.query)
	}
	f.Fuzz(func(t *testing.T, scheme, user, pass, path, query string) {
		if len(pass) < 6 || strings.ContainsAny(scheme, ":/?#@") || strings.ContainsAny(user, ":@/?#") {
			t.Skip()
		}
		for _, part := range []string{scheme, user, pass, path, query} {
			if strings.IndexFunc(part, func(r rune) bool { return !strconv.IsPrint(r) }) >= 0 {
				t.Skip() // an error quotes it: \x00 then 0000 would read as a password of zeros
			}
		}
		for _, other := range []string{scheme, user, path, query, "127.0.0.1:1"} {
			if strings.Contains(other, pass) {
				t.Skip() // the password is not secret if it is also elsewhere
			}
		}
		raw := scheme + "://" + user + ":" + pass + "@127.0.0.1:1/" + path
		if query != "" {
			raw += "?" + query
		}
		secrets := []string{pass}
		if dec, err := url.PathUnescape(pass); err == nil && dec != pass && len(dec) >= 6 {
			secrets = append(secrets, dec)
		}
		shown := Redact(raw)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		b, closer, err := Open(ctx, raw)
		if err == nil {
			_ = closer.Close()
			_ = b
		} else {
			shown += "\n" + err.Error()
		}
		for _, s := range secrets {
			if strings.Contains(shown, s) {
				t.Fatalf("%q: the password %q is printed: %q", raw, s, shown)
			}
		}
	})
}
