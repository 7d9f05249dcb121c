//go:build mutant_release_before_revoke

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "release-before-revoke"
