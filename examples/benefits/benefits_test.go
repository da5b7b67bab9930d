// Package benefits_test runs the benefits desk example's four runs
// through the real CLI code.
package benefits_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/testengine"
)

func run(t *testing.T, state, manifest, input string) (string, string) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	t.Helper()
	var out, errs bytes.Buffer
	args := []string{"run", manifest, "--state-dir", state, "--log-level", "info"}
	if input != "" {
		args = append(args, "--input", "-")
	}
	if code := cli.Main(args, strings.NewReader(input), &out, &errs); code != 0 {
		t.Fatalf("mandate run %s: exit %d\n%s\n%s", manifest, code, &out, &errs)
	}
	return out.String(), errs.String()
}

func TestBenefitsDesk(t *testing.T) {
	state := t.TempDir()

	out, _ := run(t, state, "alice.hcl", "")
	if !strings.Contains(out, "alice  plan=Gold PPO") || !strings.Contains(out, "(1 record(s)") || strings.Contains(out, "bob") {
		t.Errorf("alice:\n%s", out)
	}
	out, _ = run(t, state, "bob.hcl", "")
	if !strings.Contains(out, "bob    plan=Silver HMO") || strings.Contains(out, "alice") {
		t.Errorf("bob:\n%s", out)
	}
	out, _ = run(t, state, "alice.hcl", "bob\n")
	if !strings.Contains(out, "denied: read bob's benefits: cap_call: EDENIED") || strings.Contains(out, "Silver") {
		t.Errorf("alice asking for bob:\n%s", out)
	}
	if !strings.Contains(out, "denied: read bob's ssn field: EDENIED") {
		t.Errorf("ssn:\n%s", out)
	}
	out, logs := run(t, state, "hr.hcl", "")
	if !strings.Contains(out, "alice  plan=") || !strings.Contains(out, "dave   plan=") || !strings.Contains(out, "(2 record(s)") ||
		strings.Contains(out, "bob") || strings.Contains(out, "carol ") {
		t.Errorf("hr:\n%s", out)
	}
	if !strings.Contains(logs, "audit: allow") || !strings.Contains(logs, "op=call:query") {
		t.Errorf("hr's read was not audited:\n%s", logs)
	}
}
