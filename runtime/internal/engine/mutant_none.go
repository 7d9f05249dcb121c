//go:build !mutant_deadline_arrival && !mutant_drift_ignored && !mutant_margin_ignored && !mutant_late_reply_revives && !mutant_release_before_revoke && !mutant_release_without_token && !mutant_adopt_abandoned && !mutant_token_not_above_released && !mutant_unbounded_backoff && !mutant_unpaired_callbacks && !mutant_run_before_claim

package engine

// mutant names the deliberately broken variant of the engine this build
// runs, "" for the real one. Each is selected by a build tag mutant_<name>
// (the name with "-" for "_") and lives in a branch that the constant
// removes from every other build: the simulator must catch every one
// (runtime/internal/sim, TestMutantsCaught).
//
//	deadline-arrival          D1: the deadline counted from the reply's arrival, not the send
//	drift-ignored             D1: the local validity not shortened by Drift
//	margin-ignored            D1: ... nor by Margin
//	late-reply-revives        D4: a renewal answered after the deadline extends it
//	release-before-revoke     T5, H1: the lease released before the term is revoked
//	release-without-token     T5: releases carry no token (the store releases any term)
//	adopt-abandoned           A3: a reply to an abandoned attempt adopted
//	token-not-above-released  A3: a token this session released adopted again
//	unbounded-backoff         C3: the retry after a failed renewal not capped by RenewInterval
//	unpaired-callbacks        L1, L6: a revoked callback after an elected one that was never dispatched
//	run-before-claim          R2: a cron slot's run starts without waiting for its claim
const mutant = ""
