//go:build mutant_late_reply_revives

package engine

// A deliberately broken engine for the simulator to catch: see mutant_none.go.
const mutant = "late-reply-revives"
