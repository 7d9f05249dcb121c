//go:build mutant_release_without_token

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "release-without-token"
