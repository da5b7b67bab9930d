package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/caps/pay/paytest"
)

// TestRunListsEffects: what a run's calls did outside the kernel (here a
// charge) is listed beside its result, from the audit log: after the
// result in `mandate run`'s text, as "effects" in its --format json, and
// in `mandate graph` text and json.
func TestRunListsEffects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "pay-child"))
	if err != nil {
		t.Fatal(err)
	}
	pay := paytest.NewProvider()
	defer pay.Close()
	dir := t.TempDir()
	man := filepath.Join(dir, "pay.hcl")
	hcl := fmt.Sprintf(`task "pay" {
  module    = %q
  principal = "alice"
  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "EFFECTS_TEST_CARD" }
    payees        = ["airline.example"]
    currency      = "USD"
    max_amount    = "800 USD"
  }
}
`, guest)
	if err := os.WriteFile(man, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EFFECTS_TEST_CARD", "tok_test")
	state := filepath.Join(dir, "state")
	run := func(key, format string) (stdout, stderr string) {
		t.Helper()
		in := filepath.Join(dir, key+".json")
		if err := os.WriteFile(in, []byte(`{"Key":"`+key+`","Amount":"312.00"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := Main([]string{"run", man, "--var", "pay=" + pay.URL, "--input", in, "--state-dir", state, "--cache-dir", testCache(),
			"--format", format, "--log-level", "off"}, nil, &out, &errb)
		if code != 0 {
			t.Fatalf("mandate run --format %s: exit %d\n%s%s", format, code, &out, &errb)
		}
		return out.String(), errb.String()
	}

	// Text: the result on stdout, the effects after it on stderr.
	out, errOut := run("k1", "text")
	if out != "ESUCCESS" {
		t.Errorf("the result: %q", out)
	}
	if !strings.Contains(errOut, "effects (from the audit log):\n  t1 pay: charge 312.00 USD to airline.example → charged 312.00 USD to airline.example (id ") {
		t.Errorf("mandate run's text lists no effects:\n%s", errOut)
	}

	// JSON: "effects".
	out, _ = run("k2", "json")
	var rep struct {
		Run     string
		Result  string
		Effects []struct{ Task, Cap, Kind, Op, Summary, Outcome string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("the report: %v\n%s", err, out)
	}
	if len(rep.Effects) != 1 || rep.Effects[0].Kind != "pay" || rep.Effects[0].Op != "call:charge" ||
		rep.Effects[0].Summary != "charge 312.00 USD to airline.example" || !strings.HasPrefix(rep.Effects[0].Outcome, "charged 312.00 USD to airline.example (id ") {
		t.Errorf("the report's effects: %+v\n%s", rep.Effects, out)
	}
	if n := len(pay.Charges()); n != 2 {
		t.Errorf("%d charges, want 2", n)
	}

	// mandate graph, text and json.
	var g, ge bytes.Buffer
	if code := Main([]string{"graph", "--run", rep.Run, "--state-dir", state}, nil, &g, &ge); code != 0 {
		t.Fatalf("mandate graph: exit %d: %s", code, &ge)
	}
	if !strings.Contains(g.String(), "effects:\n  t1 ") || !strings.Contains(g.String(), "  t1 pay: charge 312.00 USD to airline.example → charged ") {
		t.Errorf("mandate graph lists no effects:\n%s", &g)
	}
	g.Reset()
	if code := Main([]string{"graph", "--run", rep.Run, "--state-dir", state, "--format", "json"}, nil, &g, &ge); code != 0 {
		t.Fatalf("mandate graph --format json: exit %d: %s", code, &ge)
	}
	var rec struct {
		Effects []struct{ Summary, Outcome string }
	}
	if err := json.Unmarshal(g.Bytes(), &rec); err != nil || len(rec.Effects) != 1 || rec.Effects[0].Summary != "charge 312.00 USD to airline.example" {
		t.Errorf("mandate graph --format json: %v: %+v", err, rec.Effects)
	}
}
