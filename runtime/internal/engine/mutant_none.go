//go:build !mutant_deadline_arrival && !mutant_drift_ignored && !mutant_margin_ignored && !mutant_late_reply_revives && !mutant_release_before_revoke && !mutant_release_without_token && !mutant_adopt_abandoned && !mutant_token_not_above_released && !mutant_unbounded_backoff && !mutant_unpaired_callbacks && !mutant_read_then_write

package engine

// mutant names the deliberately broken variant this build runs, "" for the
// real engine. Each variant is selected by a build tag mutant_<name> (the
// name with "-" as "_"); the simulator's tests must catch every one.
const mutant = ""
