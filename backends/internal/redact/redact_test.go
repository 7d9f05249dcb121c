package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"memory:", "memory:"},
		{"memory:jobs", "memory:jobs"},
		{"app:s3cret@tcp(db:3306)/simba?tls=true", "app:xxxxx@tcp(db:3306)/simba?tls=true"},
		{"admin:s3cret@localhost", "admin:xxxxx@localhost"},
		{"s3cret@localhost", "xxxxx@localhost"},
		{"u:p@tcp(h)/db?password=s3cret", "u:xxxxx@tcp(h)/db?password=xxxxx"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:s3cret@host:6379/0", "redis://xxxxx@host:6379/0"},
		{"redis://s3cret@host:6379/0", "redis://xxxxx@host:6379/0"},
		{"redis://user:s3cret@host:6379/0", "redis://user:xxxxx@host:6379/0"},
		{"redis://user:pa/ss#w@rd@host:6379/0", "redis://user:xxxxx@host:6379/0"},
		{"redis://:a#b@host/0", "redis://xxxxx@host/0"},
		{"redis://:a?b=c@host/0", "redis://xxxxx@host/0"},
		{"postgres://app:p@ss@db:5432/simba?sslmode=disable", "postgres://app:xxxxx@db:5432/simba?…"},
		{"postgres://db/simba?user=app&password=s3cret&sslmode=disable", "postgres://db/simba?…"},
		{"rediss://user:s3cret@host/2?dial_timeout=3&client_name=s3cret", "rediss://user:xxxxx@host/2?…"},
		{"redis://host:6379/0#s3cret", "redis://host:6379/0?…"},
		{"host=db user=app password=s3cret dbname=simba", "host=db user=app password=xxxxx dbname=simba"},
		{"zk://digest:s3cret@h1:2181,h2:2181/simba", "zk://digest:xxxxx@h1:2181,h2:2181/simba"},
		{"zk://h1:2181/simba?auth=s3cret", "zk://h1:2181/simba?…"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if strings.Contains(URL(tc.in), "s3cret") || strings.Contains(URL(tc.in), "ss#w") {
			t.Errorf("URL(%q) = %q shows the secret", tc.in, URL(tc.in))
		}
	}
}

// FuzzURL: whatever the password placed in a URL's userinfo holds, it is
// replaced whole, and the rest of the URL is kept.
func FuzzURL(f *testing.F) {
	f.Add("redis", "user", "p/a#s?s@w", "host:6379/0")
	f.Add("postgres", "", "s3cret", "db/simba")
	f.Add("zk", "digest", "@@", "h1:2181,h2:2181/root")
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		if strings.Contains(scheme, "://") || strings.ContainsAny(user, ":@/?#") || strings.Contains(rest, "@") ||
			strings.ContainsAny(rest, "?#") {
			t.Skip()
		}
		raw := scheme + "://" + user + ":" + pass + "@" + rest
		want := scheme + "://" + Mask + "@" + rest
		if user != "" {
			want = scheme + "://" + user + ":" + Mask + "@" + rest
		}
		if got := URL(raw); got != want {
			t.Fatalf("URL(%q) = %q; want %q", raw, got, want)
		}
	})
}
