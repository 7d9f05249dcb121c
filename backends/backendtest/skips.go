package backendtest

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// RequireEnv names the environment variable under which every case must
// run: set to a true value (1, true; `make test` sets it), a case that would
// skip for want of a hook or an ability fails instead, unless the harness
// lists it in its Skip with the reason. So a hook dropped or forgotten fails
// CI rather than passing it unchecked.
const RequireEnv = "SIMBA_REQUIRE_SERVICES"

// everyCaseRequired reports whether RequireEnv is set to anything but a
// false value ("", "0", "false", …): a typo errs on the strict side.
func everyCaseRequired() bool {
	v := strings.TrimSpace(os.Getenv(RequireEnv))
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// lacking ends a case that needs what the harness or the backend lacks
// (what says which): it is skipped with that message, or, under RequireEnv,
// fails.
func lacking(t *testing.T, what string) {
	t.Helper()
	if everyCaseRequired() {
		t.Fatalf("%s, and %s requires every case to run: provide it, or list the case in the harness's Skip with the reason", what, RequireEnv)
	}
	t.Skip(what)
}

// checkSkips fails t if skip names a case that is not one of names.
func checkSkips(t *testing.T, skip map[string]string, names []string) {
	t.Helper()
	for name, why := range skip {
		if !slices.Contains(names, name) {
			t.Fatalf("backendtest: the harness's Skip names %q, which is no case; the cases are %s", name, strings.Join(names, ", "))
		}
		if strings.TrimSpace(why) == "" {
			t.Fatalf("backendtest: the harness's Skip lists %q without a reason", name)
		}
	}
}
