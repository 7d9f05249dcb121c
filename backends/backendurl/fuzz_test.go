package backendurl_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/simba-go/simba/backends/all"
	. "github.com/simba-go/simba/backends/backendurl"
)

// FuzzNoCredentialPrinted: whatever a backend URL holds in its password
// and its query, neither Redact nor any error of Open or OpenInspector
// prints the password, for every registered scheme (every backend of
// backends/all), in the URL form and in the scheme:userinfo@… form without
// "//". The servers are on 127.0.0.1 port 1, where nothing listens: Open
// fails fast, never reaching further than the loopback.
func FuzzNoCredentialPrinted(f *testing.F) {
	for _, s := range []struct{ user, pass, path, query string }{
		{"", "s3cretpw", "0", ""},
		{"user", "p/a#s?s@w0rd", "0", "dial_timeout=3"},
		{"u", "s3cr%65tpw", "2", "client_name=x"},
		{"simba", "pa ss:word", "simba", "sslmode=disable"},
		{"app", "hunter2hunter2", "x", "simba_max_lease=forever"},
		{"digest", "zkp4ssw0rd", "simba", "auth=zkp4ssw0rd"},
		{"u", "s3cretpw", "x", "password=s3cretpw"},
		{"u", "p[a]s{s}w|o^r`d", "x", ""},
		{"u", "!$&'()*+,;=s3", "x", ""},
		{"u", "s3cret:pw:more", "db", "x=%zz"},
	} {
		f.Add(s.user, s.pass, s.path, s.query)
	}
	schemes := Schemes()
	if len(schemes) < 8 {
		f.Fatalf("registered schemes %v: want every backend of backends/all", schemes)
	}
	f.Fuzz(func(t *testing.T, user, pass, path, query string) {
		if len(pass) < 6 || strings.ContainsAny(user, ":@/?#") {
			t.Skip()
		}
		for _, part := range []string{user, pass, path, query} {
			if strings.IndexFunc(part, func(r rune) bool { return !strconv.IsPrint(r) }) >= 0 {
				t.Skip() // an error quotes it: \x00 then 0000 would read as a password of zeros
			}
		}
		for _, other := range append([]string{user, path, query, "127.0.0.1:1"}, schemes...) {
			if strings.Contains(other, pass) {
				t.Skip() // the password is not secret if it is also elsewhere
			}
		}
		secrets := []string{pass}
		if dec, err := url.PathUnescape(pass); err == nil && dec != pass && len(dec) >= 6 {
			secrets = append(secrets, dec)
		}
		for _, scheme := range schemes {
			for _, sep := range []string{"://", ":"} {
				withPass := func(pass string) string {
					raw := scheme + sep + user + ":" + pass + "@127.0.0.1:1/" + path
					if query != "" {
						raw += "?" + query
					}
					return raw
				}
				raw := withPass(pass)
				shown := printed(raw)
				for _, s := range secrets {
					if strings.Contains(shown, s) {
						t.Fatalf("%q: the password %q is printed: %q", raw, s, shown)
					}
				}
				// A part of the password between characters that URLs
				// reserve, as a parser that stops at one quotes it, unless
				// the same URL with every other byte of the password
				// changed prints it too (it is then the message's own).
				var masked string
				for _, part := range strings.FieldsFunc(pass, reserved) {
					if len(part) < 4 || !strings.Contains(shown, part) {
						continue
					}
					if masked == "" {
						masked = printed(withPass(strings.Map(func(r rune) rune {
							if reserved(r) {
								return r
							}
							return 'Z'
						}, pass)))
					}
					if !strings.Contains(masked, part) {
						t.Fatalf("%q: part %q of the password is printed: %q", raw, part, shown)
					}
				}
			}
		}
	})
}

// printed returns what Redact, Open and OpenInspector print for raw: the
// redacted URL and their errors.
func printed(raw string) string {
	shown := Redact(raw)
	for _, inspect := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		var err error
		if inspect {
			_, c, e := OpenInspector(ctx, raw)
			if e == nil {
				c.Close()
			}
			err = e
		} else {
			_, c, e := Open(ctx, raw)
			if e == nil {
				c.Close()
			}
			err = e
		}
		cancel()
		if err != nil {
			shown += "\n" + err.Error()
		}
	}
	return shown
}

// reserved reports whether r is a character that URLs reserve, or "%".
func reserved(r rune) bool { return strings.ContainsRune(":/?#[]@!$&'()*+,;=% ", r) }
