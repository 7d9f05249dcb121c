package memory_test

import (
	"testing"

	"github.com/simba-go/simba/backends/memory"
)

// §12: a memory URL takes no options, and its scheme may be in any case,
// as backendurl accepts it.
func TestOpenURL(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"memory://jobs", `simba: backend URL "memory://jobs": write memory: or memory:NAME, without //`},
		{"memory:jobs?simba_max_lease=5s", `simba: backend URL "memory:jobs?simba_max_lease=5s": a memory store takes no options; want memory: or memory:NAME, NAME without ? or #`},
		{"memory:jobs#x", `simba: backend URL "memory:jobs#x": a memory store takes no options; want memory: or memory:NAME, NAME without ? or #`},
	} {
		s, err := memory.OpenURL(tt.url)
		if err == nil || err.Error() != tt.want {
			t.Errorf("OpenURL(%q) = %v, %v; want the error\n%s", tt.url, s, err, tt.want)
		}
	}
	for url, want := range map[string]*memory.Store{
		"memory:":        memory.Open(""),
		"MEMORY:":        memory.Open(""),
		"Memory:urltest": memory.Open("urltest"),
		"memory:urltest": memory.Open("urltest"),
	} {
		if s, err := memory.OpenURL(url); err != nil || s != want {
			t.Errorf("OpenURL(%q) = %p, %v; want the store %p", url, s, err, want)
		}
	}
}
