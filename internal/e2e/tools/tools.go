// Package tools holds the test that writes, builds and runs a tool of
// every language and capability kind with the mandate command (a package
// of its own, so its minutes run beside the fleet's in internal/e2e).
package tools
