// Package stress holds long-running tests. They build only with the stress
// tag and run with `make stress`; `make test` runs the short, isolated
// regressions that live beside them without the tag.
package stress
