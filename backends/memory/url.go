package memory

import (
	"fmt"
	"strings"

	"github.com/simba-go/simba/backends/internal/redact"
)

// OpenURL returns the process-wide store that a memory URL names:
// "memory:" is the default store, [Open](""), and "memory:NAME" the store
// [Open](NAME), whatever case the scheme is in. A store takes no options:
// a NAME with "?" or "#" is refused. Package backendurl, which registers the
// scheme, opens memory URLs with it.
func OpenURL(rawURL string) (*Store, error) {
	_, name, _ := strings.Cut(rawURL, ":")
	if strings.HasPrefix(name, "//") {
		return nil, fmt.Errorf("simba: backend URL %q: write memory: or memory:NAME, without //", redact.URL(rawURL))
	}
	if strings.ContainsAny(name, "?#") {
		return nil, fmt.Errorf("simba: backend URL %q: a memory store takes no options; want memory: or memory:NAME, NAME without ? or #", redact.URL(rawURL))
	}
	return Open(name), nil
}
