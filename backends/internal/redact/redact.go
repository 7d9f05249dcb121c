// Package redact removes credentials from backend URLs before they appear in
// an error or a log line. It does not parse the URL the way a driver would:
// a password may hold an unescaped "/", "#", "?" or "@" that confuses a
// parser, so it errs on the side of hiding too much.
package redact

import "strings"

// Mask replaces every credential that URL shows.
const Mask = "xxxxx"

// URL returns raw with its credentials replaced by [Mask]:
//
//   - the userinfo of scheme://userinfo@host…, taken to end at the last "@"
//     of the URL, so that a password holding "/", "#", "?" or "@" is hidden
//     whole: the password if a user name precedes a ":", else all of it
//     (Redis takes a lone user name for a password);
//   - the query and fragment, which may carry a password (PostgreSQL's
//     ?password=, any driver's options), replaced by "?…";
//   - in a string without "://", what precedes its last "@" (MySQL's
//     user:password@tcp(host)/db), and in a keyword/value DSN (PostgreSQL's)
//     the value of every password-like key (password, pass, pwd,
//     sslpassword, secret, token, auth).
//
// A URL without credentials or query comes back unchanged.
func URL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		// A keyword/value DSN, or a driver's own form such as MySQL's
		// user:password@tcp(host:3306)/db: hide what precedes the last "@".
		if at := strings.LastIndexByte(raw, '@'); at >= 0 {
			return userinfo(raw[:at]) + params(raw[at+1:])
		}
		return params(raw)
	}
	user := ""
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user = userinfo(rest[:at])
		rest = rest[at+1:]
	}
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		rest = rest[:q] + "?…"
	}
	return scheme + "://" + user + rest
}

// userinfo returns the masked form of a URL's userinfo (without its "@"):
// the user name and a masked password if a plain user name precedes a ":",
// else all of it masked (Redis takes a lone user name for a password).
func userinfo(s string) string {
	name, _, hasPass := strings.Cut(s, ":")
	if hasPass && name != "" && !strings.ContainsAny(name, "/?#&= ") {
		return name + ":" + Mask + "@"
	}
	return Mask + "@"
}

// secretKeys are the parameter names whose values params hides.
var secretKeys = []string{"password", "pass", "pwd", "sslpassword", "secret", "token", "auth"}

// params hides the values of password-like key=value pairs, separated by
// "&", "?", ";" or spaces, as in a URL query or a keyword/value DSN.
func params(s string) string {
	var b strings.Builder
	i := 0
	for i < len(s) {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			break
		}
		eq += i
		start := eq
		for start > i && !isSep(s[start-1]) {
			start--
		}
		end := eq + 1
		for end < len(s) && !isSep(s[end]) {
			end++
		}
		b.WriteString(s[i : eq+1])
		if isSecret(s[start:eq]) && end > eq+1 {
			b.WriteString(Mask)
		} else {
			b.WriteString(s[eq+1 : end])
		}
		i = end
	}
	b.WriteString(s[i:])
	return b.String()
}

func isSep(c byte) bool {
	return c == '&' || c == '?' || c == ';' || c == ' ' || c == '\t' || c == '\n'
}

func isSecret(key string) bool {
	key = strings.ToLower(key)
	for _, k := range secretKeys {
		if key == k {
			return true
		}
	}
	return false
}
