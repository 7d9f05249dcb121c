package simbaredis

import (
	"regexp"
	"strings"
	"testing"
)

// placeholder matches a $NAME of the Lua sources (luaTags).
var placeholder = regexp.MustCompile(`\$[A-Z]+`)

// Each script defines the clock and reads INFO at most once, and the
// guarded ones (see check_meta) read INFO: newScript resolves the helpers,
// and a mistake there would cost a command on every call, or skip the
// amnesia guard.
func TestScriptHelpers(t *testing.T) {
	for _, sc := range []*script{scriptOpen, scriptKeepAlive, scriptOwned, scriptAcquire, scriptCheck, scriptRelease,
		scriptHolder, scriptPutValue, scriptJoin, scriptLeave, scriptMembers, scriptClose, scriptAcquireBatch, scriptReleaseBatch} {
		if p := placeholder.FindString(sc.src + sc.armed); p != "" {
			t.Errorf("%s: placeholder %s is left in its source (see luaTags)", sc.name, p)
		}
		if n := strings.Count(sc.src, "local NOW"); n > 1 {
			t.Errorf("%s: %d definitions of NOW; want at most 1", sc.name, n)
		}
		if n := strings.Count(sc.src, "redis.call('INFO'"); n > 1 || (n == 1) != sc.guarded {
			t.Errorf("%s (guarded %v): %d INFO calls; want 1 if guarded, else 0", sc.name, sc.guarded, n)
		}
		if strings.Contains(sc.src, "NOW") != strings.Contains(sc.src, "local NOW") {
			t.Errorf("%s uses NOW without defining it", sc.name)
		}
	}
	if strings.Contains(scriptAcquire.src, "redis.call('TIME')\nlocal NOW") {
		t.Error("acquire reads TIME; want the clock from INFO, which it reads anyway")
	}
	// The armed variants read no INFO, take the clock from TIME, and check
	// the run id written into them.
	for _, sc := range armedScripts {
		if sc.armed == "" || strings.Contains(sc.armed, "redis.call('INFO'") || strings.Count(sc.armed, "local NOW") != 1 ||
			strings.Count(sc.armed, runPlaceholder) != 1 || !strings.Contains(sc.armed, "if m[2] ~= RUN then return {'ARM'} end") {
			t.Errorf("%s: armed variant reads INFO, lacks its clock or its run check:\n%s", sc.name, sc.armed)
		}
	}
}
