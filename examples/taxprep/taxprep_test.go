// Package taxprep_test runs the verifiable-confinement example.
package taxprep_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/testengine"
)

func TestTaxPrepReceipt(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	state := t.TempDir()
	receipt := filepath.Join(t.TempDir(), "taxprep.receipt")
	var out, errs bytes.Buffer
	code := cli.Main([]string{"run", "taxprep.hcl", "--input", "w2.json", "--receipt", receipt, "--state-dir", state, "--log-level", "warn"}, nil, &out, &errs)
	if code != 0 || !strings.Contains(out.String(), "Form 1040 summary for Alice Smith") {
		t.Fatalf("run: exit %d\n%s\n%s", code, &out, &errs)
	}
	out.Reset()
	errs.Reset()
	if code := cli.Main([]string{"verify", receipt, "--state-dir", state}, nil, &out, &errs); code != 0 {
		t.Fatalf("verify: exit %d\n%s\n%s", code, &out, &errs)
	}
	for _, want := range []string{"verifies", "acting for alice", "no capability at all", "reach the network", "Nothing left the run but its result."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verify output lacks %q:\n%s", want, &out)
		}
	}
	// One changed byte: the receipt no longer verifies.
	b, _ := os.ReadFile(receipt)
	i := bytes.Index(b, []byte(`"principal": "alice"`))
	b[i+len(`"principal": "`)] = 'm' // "mlice"
	if err := os.WriteFile(receipt, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errs.Reset()
	if code := cli.Main([]string{"verify", receipt, "--state-dir", state}, nil, &out, &errs); code != 1 || !strings.Contains(errs.String(), "does NOT verify") {
		t.Fatalf("tampered receipt: exit %d\n%s\n%s", code, &out, &errs)
	}
}
