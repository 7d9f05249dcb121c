// Package enginetest runs runtime clients as the nodes of a cluster on a
// backend under test, for the backends' end-to-end and fault tests and for
// the engine scenarios of package backendtest: a [Cluster] starts nodes,
// records every term they hold in a termcheck.Recorder, and checks the term
// invariant (never two valid terms of a name, tokens rising, callbacks
// paired) when the test ends.
//
// Rule names such as L1 refer to docs/design.md in the repository.
package enginetest
