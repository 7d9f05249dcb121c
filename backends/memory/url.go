package memory

import (
	"fmt"
	"strings"

	"github.com/simba-go/simba/backends/internal/redact"
)

// OpenURL returns the process-wide store that a memory URL names:
// "memory:" is the default store, [Open](""), and "memory:NAME" the store
// [Open](NAME). Package backendurl, which registers the scheme, opens
// memory URLs with it.
func OpenURL(rawURL string) (*Store, error) {
	_, name, _ := strings.Cut(rawURL, ":")
	if strings.HasPrefix(name, "//") {
		return nil, fmt.Errorf("simba: backend URL %q: write memory: or memory:NAME, without //", redact.URL(rawURL))
	}
	return Open(name), nil
}
