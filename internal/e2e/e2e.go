// Package e2e holds the tests that run the mandate command as processes
// against real services (a NATS cluster, tools written by mandate new),
// apart from internal/cli so that their minutes run beside that package's.
package e2e
