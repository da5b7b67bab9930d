// Package taxprep_test runs the verifiable-confinement example.
package taxprep_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mandatevm/mandate/audit"
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

// copyExample copies the example (its manifest, input and tool) to a
// folder of its own, the tool a module of its own as a reviewer would
// get it, and returns the folder.
func copyExample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "tool"), os.DirFS("tool")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"taxprep.hcl", "w2.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod := "module example.com/taxprep/tool\n\ngo 1.26.0\n\nrequire github.com/mandatevm/mandate/guest-sdk v0.1.0\n"
	if err := os.WriteFile(filepath.Join(dir, "tool", "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mandate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := cli.Main(args, nil, &out, &errs)
	return code, out.String(), errs.String()
}

// TestTaxPrepSource: the whole story. The receipt names the module and
// how it was built; verify --source rebuilds the reviewed source and
// finds the module byte for byte; a one-byte change in the source is
// named by its file.
func TestTaxPrepSource(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	dir := copyExample(t)
	state := t.TempDir()
	receipt := filepath.Join(t.TempDir(), "taxprep.receipt")
	code, out, errs := mandate(t, "run", filepath.Join(dir, "taxprep.hcl"), "--input", filepath.Join(dir, "w2.json"), "--receipt", receipt, "--state-dir", state, "--log-level", "warn")
	if code != 0 || !strings.Contains(out, "Form 1040 summary for Alice Smith") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mandate(t, "verify", receipt, "--state-dir", state, "--source", filepath.Join(dir, "tool"))
	if code != 0 {
		t.Fatalf("verify --source: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"no capability at all", "The module was built by mandate build: go (main-entry)", "builds the module the receipt names, byte for byte"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify --source output lacks %q:\n%s", want, out)
		}
	}

	// Built in a git checkout, checked against a copy outside it: the
	// same code, only the recorded revision differs.
	git := filepath.Join(dir, ".git")
	if err := os.MkdirAll(filepath.Join(git, "refs", "heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(git, "refs", "heads", "main"), []byte(strings.Repeat("ab", 20)+"\n"), 0o644)
	inGit := filepath.Join(t.TempDir(), "taxprep.receipt")
	if code, out, errs := mandate(t, "run", filepath.Join(dir, "taxprep.hcl"), "--input", filepath.Join(dir, "w2.json"), "--receipt", inGit, "--state-dir", state, "--log-level", "warn"); code != 0 {
		t.Fatalf("run in a checkout: exit %d\n%s\n%s", code, out, errs)
	}
	if err := os.RemoveAll(git); err != nil {
		t.Fatal(err)
	}
	code, out, errs = mandate(t, "verify", inGit, "--state-dir", state, "--source", filepath.Join(dir, "tool"))
	if code != 0 || !strings.Contains(out, "git revision "+strings.Repeat("ab", 20)) || !strings.Contains(out, "only the checkout's revision differs") {
		t.Fatalf("verify --source of a copy outside git: exit %d\n%s\n%s", code, out, errs)
	}

	// One byte of the reviewed source changed: named by its file.
	main := filepath.Join(dir, "tool", "main.go")
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("14600.0"))
	if i < 0 {
		t.Fatal("main.go has no standard deduction of 14600.0")
	}
	b[i] = '2' // 24600.0
	if err := os.WriteFile(main, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = mandate(t, "verify", receipt, "--state-dir", state, "--source", filepath.Join(dir, "tool"))
	if code != 1 || !strings.Contains(out, "does NOT build the module") || !strings.Contains(out, "main.go: changed") {
		t.Fatalf("verify --source of a changed source: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "go.mod") {
		t.Errorf("verify named a file that did not change:\n%s", out)
	}
}

// TestTaxPrepDSSE: the receipt as an in-toto bundle verifies with
// mandate verify and with go-securesystemslib's own DSSE verifier given
// only "mandate audit key --pem"; its provenance names the module; one
// changed byte fails both.
func TestTaxPrepDSSE(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	state := t.TempDir()
	receipt := filepath.Join(t.TempDir(), "taxprep.intoto.jsonl")
	code, out, errs := mandate(t, "run", "taxprep.hcl", "--input", "w2.json", "--receipt", receipt, "--receipt-format", "dsse", "--state-dir", state, "--log-level", "warn")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = mandate(t, "verify", receipt, "--state-dir", state)
	if code != 0 || !strings.Contains(out, "in-toto statement in a DSSE envelope") || !strings.Contains(out, "SLSA provenance") || !strings.Contains(out, "no capability at all") {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errs)
	}
	code, pemKey, errs := mandate(t, "audit", "key", "--pem", "--state-dir", state)
	if code != 0 {
		t.Fatalf("audit key --pem: exit %d\n%s", code, errs)
	}
	bundle, err := os.ReadFile(receipt)
	if err != nil {
		t.Fatal(err)
	}
	lib := func(bundle []byte) error {
		k, err := signerverifier.LoadKey([]byte(pemKey))
		if err != nil {
			return err
		}
		v, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(k)
		if err != nil {
			return err
		}
		ev, err := dsse.NewEnvelopeVerifier(v)
		if err != nil {
			return err
		}
		lines := bytes.Split(bytes.TrimSpace(bundle), []byte("\n"))
		if len(lines) != 2 {
			return fmt.Errorf("%d envelopes, want the run's and the provenance", len(lines))
		}
		for _, line := range lines {
			var env dsse.Envelope
			if err := json.Unmarshal(line, &env); err != nil {
				return err
			}
			if _, err := ev.Verify(context.Background(), &env); err != nil {
				return err
			}
		}
		return nil
	}
	if err := lib(bundle); err != nil {
		t.Fatalf("go-securesystemslib's verifier: %v", err)
	}
	opensslVerify(t, pemKey, bundle)
	// One byte of the first envelope's signature changed.
	i := bytes.Index(bundle, []byte(`"sig":"`)) + len(`"sig":"`) + 3
	bad := append([]byte(nil), bundle...)
	bad[i] ^= 1
	if err := os.WriteFile(receipt, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if lib(bad) == nil {
		t.Fatal("the library verified a changed envelope")
	}
	if code, out, errs := mandate(t, "verify", receipt, "--state-dir", state); code != 1 || !strings.Contains(errs, "does NOT verify") {
		t.Fatalf("verify of a changed bundle: exit %d\n%s\n%s", code, out, errs)
	}
}

// opensslVerify checks the bundle's first envelope as the README shows,
// with no DSSE code at all: openssl verifies the Ed25519 signature over
// DSSE's pre-authentication encoding, made here by hand.
func opensslVerify(t *testing.T, pemKey string, bundle []byte) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Log("no openssl: the generic check is not run")
		return
	}
	var env dsse.Envelope
	if err := json.Unmarshal(bytes.SplitN(bundle, []byte("\n"), 2)[0], &env); err != nil {
		t.Fatal(err)
	}
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key, sigFile := write("key.pem", []byte(pemKey)), write("sig.bin", sig)
	check := func(body []byte) error {
		pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(env.PayloadType), env.PayloadType, len(body), body)
		out, err := exec.Command(openssl, "pkeyutl", "-verify", "-pubin", "-inkey", key, "-rawin", "-in", write("pae.bin", pae), "-sigfile", sigFile).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := check(body); err != nil {
		t.Fatalf("openssl: %v", err)
	}
	bad := bytes.Replace(body, []byte("alice"), []byte("alicf"), 1)
	if check(bad) == nil {
		t.Fatal("openssl verified a changed payload")
	}
}

// TestTaxPrepSpliced: envelopes signed by the right key but put together
// wrongly are refused: one run's statement with another module's
// provenance, two run statements, a statement mandate does not write. A
// provenance alone verifies as what it is, and --source checks it.
func TestTaxPrepSpliced(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	dir := copyExample(t)
	state := t.TempDir()
	run := func() []byte {
		t.Helper()
		path := filepath.Join(t.TempDir(), "r.jsonl")
		if code, out, errs := mandate(t, "run", filepath.Join(dir, "taxprep.hcl"), "--input", filepath.Join(dir, "w2.json"), "--receipt", path, "--receipt-format", "dsse", "--state-dir", state, "--log-level", "warn"); code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := bytes.Split(bytes.TrimSpace(run()), []byte("\n"))
	main := filepath.Join(dir, "tool", "main.go")
	src, _ := os.ReadFile(main)
	os.WriteFile(main, append(src, []byte("\n// another build\n")...), 0o644)
	b := bytes.Split(bytes.TrimSpace(run()), []byte("\n"))
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("bundles of %d and %d envelopes, want 2", len(a), len(b))
	}
	// An envelope of a statement mandate does not write, signed by the key.
	log, err := audit.Open(filepath.Join(state, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := log.SignStatement(&intoto.Statement{Type: intoto.StatementTypeUri, PredicateType: "https://example.com/other/v1",
		Subject:   []*intoto.ResourceDescriptor{{Name: "x", Digest: map[string]string{"sha256": strings.Repeat("00", 32)}}},
		Predicate: &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewBoolValue(true)}}})
	log.Close()
	if err != nil {
		t.Fatal(err)
	}
	otherLine, _ := json.Marshal(other)
	verify := func(lines [][]byte, args ...string) (int, string, string) {
		path := filepath.Join(t.TempDir(), "spliced.jsonl")
		os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644)
		return mandate(t, append([]string{"verify", path, "--state-dir", state}, args...)...)
	}
	for name, c := range map[string]struct {
		lines [][]byte
		want  string
	}{
		"another module's provenance": {[][]byte{a[0], b[1]}, "does not say what the receipt's build record says"},
		"two run statements":          {[][]byte{a[0], b[0], a[1]}, "a second run statement"},
		"no provenance":               {[][]byte{a[0]}, "no provenance statement"},
		"another statement":           {[][]byte{a[0], a[1], otherLine}, "is not one mandate writes"},
	} {
		if code, out, errs := verify(c.lines); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q\n%s\n%s", name, code, c.want, out, errs)
		}
	}
	// The second build's provenance alone: it names its module, and the
	// source it came from (main.go as it is now) builds it.
	code, out, errs := verify([][]byte{b[1]}, "--source", filepath.Join(dir, "tool"))
	if code != 0 || !strings.Contains(out, "provenance") || !strings.Contains(out, "builds the module the provenance names, byte for byte") {
		t.Fatalf("a provenance alone, --source: exit %d\n%s\n%s", code, out, errs)
	}
	// A file past the bound is not read whole.
	huge := filepath.Join(t.TempDir(), "huge.jsonl")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 65<<20); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := mandate(t, "verify", huge, "--state-dir", state); code != 2 || !strings.Contains(errs, "not a receipt") {
		t.Errorf("a 65 MiB file: exit %d\n%s\n%s", code, out, errs)
	}
	// The first build's, against the changed source: main.go named.
	code, out, errs = verify([][]byte{a[1]}, "--source", filepath.Join(dir, "tool"))
	if code != 1 || !strings.Contains(out, "main.go: changed") {
		t.Fatalf("a provenance alone, another source: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestTaxPrepPublished: Bob publishes the module and its provenance
// (mandate build --provenance); anyone checks the provenance with his
// key and rebuilds the module from the source he published.
func TestTaxPrepPublished(t *testing.T) {
	dir := copyExample(t)
	state, out := t.TempDir(), t.TempDir()
	wasm, prov := filepath.Join(out, "tool.wasm"), filepath.Join(out, "tool.intoto.jsonl")
	code, stdout, errs := mandate(t, "build", filepath.Join(dir, "tool"), "-o", wasm, "--provenance", prov, "--state-dir", state)
	if code != 0 || !strings.Contains(errs, "provenance "+prov) {
		t.Fatalf("build --provenance: exit %d\n%s\n%s", code, stdout, errs)
	}
	digest := strings.Fields(stdout)[0]
	code, vkey, errs := mandate(t, "audit", "key", "--state-dir", state)
	vkey = strings.TrimSpace(vkey)
	if code != 0 || vkey == "" {
		t.Fatalf("audit key: exit %d\n%s", code, errs)
	}
	code, stdout, errs = mandate(t, "verify", prov, "--key", vkey, "--source", filepath.Join(dir, "tool"))
	if code != 0 || !strings.Contains(stdout, "module "+digest+" was built by mandate build") || !strings.Contains(stdout, "builds the module the provenance names, byte for byte: "+digest) {
		t.Fatalf("verify the provenance: exit %d\n%s\n%s", code, stdout, errs)
	}
}
