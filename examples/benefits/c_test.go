package benefits_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
)

// needC skips the test when the C toolchain is missing, except on CI
// (CI=true), which installs it: there a missing toolchain fails.
func needC(t testing.TB) {
	t.Helper()
	if _, err := guestbuild.CToolchain(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but: %v", err)
		}
		t.Skipf("skipping the C benefits desk: %v", err)
	}
}

// cManifest writes manifest (bob.hcl, hr.hcl) with the C module into a
// temporary directory, its paths made absolute, and returns its path.
// alice-c.hcl is checked in; the others differ from theirs only so.
func cManifest(t *testing.T, manifest string) string {
	t.Helper()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{`module    = "guest"`, `module    = "` + filepath.Join(here, "guest-c") + `"`},
		{`file = "data/`, `file = "` + filepath.Join(here, "data") + `/`},
		{`file      = "data/`, `file      = "` + filepath.Join(here, "data") + `/`},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	if !strings.Contains(s, filepath.Join(here, "guest-c")) {
		t.Fatalf("%s: no module = \"guest\" line to replace", manifest)
	}
	p := filepath.Join(t.TempDir(), strings.TrimSuffix(manifest, ".hcl")+"-c.hcl")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBenefitsDeskC is TestBenefitsDesk with the C port of the tool
// (guest-c/main.c): the same runs, the same assertions.
func TestBenefitsDeskC(t *testing.T) {
	needC(t)
	state := t.TempDir()
	alice := "alice-c.hcl"
	if b, err := os.ReadFile(alice); err != nil || !strings.Contains(string(b), `module    = "guest-c"`) {
		t.Fatalf("%s does not name guest-c (%v)", alice, err)
	}

	out, _ := run(t, state, alice, "")
	if !strings.Contains(out, "alice  plan=Gold PPO") || !strings.Contains(out, "(1 record(s)") || strings.Contains(out, "bob") {
		t.Errorf("alice:\n%s", out)
	}
	out, _ = run(t, state, cManifest(t, "bob.hcl"), "")
	if !strings.Contains(out, "bob    plan=Silver HMO") || strings.Contains(out, "alice") {
		t.Errorf("bob:\n%s", out)
	}
	out, _ = run(t, state, alice, "bob\n")
	if !strings.Contains(out, "denied: read bob's benefits: cap_call: EDENIED") || strings.Contains(out, "Silver") {
		t.Errorf("alice asking for bob:\n%s", out)
	}
	if !strings.Contains(out, "denied: read bob's ssn field: EDENIED") {
		t.Errorf("ssn:\n%s", out)
	}
	out, logs := run(t, state, cManifest(t, "hr.hcl"), "")
	if !strings.Contains(out, "alice  plan=") || !strings.Contains(out, "dave   plan=") || !strings.Contains(out, "(2 record(s)") ||
		strings.Contains(out, "bob") || strings.Contains(out, "carol ") {
		t.Errorf("hr:\n%s", out)
	}
	if !strings.Contains(logs, "audit: allow") || !strings.Contains(logs, "op=call:query") {
		t.Errorf("hr's read was not audited:\n%s", logs)
	}
}

// TestBenefitsDeskCSameOutput runs both tools on the same inputs: their
// results are the same bytes.
func TestBenefitsDeskCSameOutput(t *testing.T) {
	needC(t)
	state := t.TempDir()
	for _, c := range []struct{ manifest, input string }{
		{"alice.hcl", ""}, {"alice.hcl", "bob\n"}, {"alice.hcl", "  alice \n"}, {"alice.hcl", `"quoted" <owner>` + "\n"},
		{"bob.hcl", ""}, {"hr.hcl", ""}, {"hr.hcl", "dave"}, {"hr.hcl", "carol"},
	} {
		goOut, _ := run(t, state, c.manifest, c.input)
		cOut, _ := run(t, state, cManifest(t, c.manifest), c.input)
		if goOut != cOut {
			t.Errorf("%s, input %q:\nGo:\n%s\nC:\n%s", c.manifest, c.input, goOut, cOut)
		}
	}
}
