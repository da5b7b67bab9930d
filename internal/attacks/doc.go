// Package attacks is Mandate's attack suite: one small hostile guest per
// attack under testdata/attacks/<name>, each run in a real kernel with
// every real capability kind (net against loopback servers that record
// every request, data on a SQLite store holding two people's records, pay
// against a recording provider, spawn, declassify and the kernel's test
// kind) and a real, verified audit log.
//
// For each attack the test (attacks_test.go) asserts four things:
//
//   - containment: every attempt the guest reports got the expected errno,
//     or the task ended in the expected state (timed_out, out_of_memory...);
//   - audit: the denials are in the audit log with the right op, errno and
//     decision, every denial of the task is there, and the log verifies;
//   - no side effect: the recording servers saw no forbidden request and no
//     secret, the provider's total is what the budget allows, the data
//     store is unchanged;
//   - health: a well-behaved guest then runs on the same kernel and
//     succeeds.
//
// Run it with
//
//	go test ./internal/attacks/
//	go test -run 'TestAttacks/exfil-' -v ./internal/attacks/
//
// The package holds only tests; SECURITY.md ("Attack suite") lists every
// attack with the law that stops it.
package attacks
