// Package tagged covers directives in files with build constraints
// (G3): the generated file carries their constraint, so that a build
// without the tag, which excludes the annotated functions, excludes the
// registrations too and still compiles. The tests load it with -tags
// simbagolden, and vet it without.
package tagged
