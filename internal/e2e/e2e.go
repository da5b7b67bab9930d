// Package e2e holds the tests that run the mandate command as processes
// against a real NATS server or cluster (the fleet), apart from
// internal/cli so that their minutes run beside that package's;
// internal/e2e/tools does the same for tools written by mandate new.
package e2e
