// Package cron runs a cron schedule in several node processes on a real
// Redis, each process reading the store's clock seconds off from the others
// (the skew is injected in the node's view: the store times its backend
// hands the runtime are shifted; the store, which fences every write by
// token, is untouched), while the test kills and pauses the leaders; it
// checks, in Redis itself, that no slot ran twice (R2 in docs/design.md).
// `make test` runs it with the tests module.
package cron
