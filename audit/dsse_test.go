package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
)

const testModule = "sha256:d86509f86375e22424214d134e7c07ab9558b7a585eeb3a997a489b15f79fdcf"

func testReceipt(t testing.TB, l *Log) Receipt {
	t.Helper()
	cp, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return Receipt{Run: "r1", Manifest: "tax.hcl", ManifestDigest: "sha256:" + strings.Repeat("ab", 32),
		Module: testModule, Principal: "alice",
		Grants:     []ReceiptGrant{{Name: "web", Kind: "net", Scope: json.RawMessage(`{"origin":"https://a.example","max":12}`)}},
		Tasks:      []ReceiptTask{{ID: "t1", Module: testModule, State: "done", Label: json.RawMessage(`{"conf":[],"integ":[]}`), Clearance: json.RawMessage(`null`)}},
		Checkpoint: string(cp),
		Build:      json.RawMessage(`{"version":1,"lang":"go"}`)}
}

// TestReceiptDSSE: a receipt signed as an in-toto statement in a DSSE
// envelope opens with Mandate's reader and with the library's own
// verifier given nothing but the PEM public key; a changed byte anywhere
// in the file fails unless it left the payload and signature as they
// were (base64's unused low bits of a last character).
func TestReceiptDSSE(t *testing.T) {
	l, _ := open(t)
	want := testReceipt(t, l)
	st, err := ReceiptStatement(want)
	if err != nil {
		t.Fatal(err)
	}
	env, err := l.SignStatement(st)
	if err != nil {
		t.Fatal(err)
	}
	file, err := EncodeEnvelopes(env)
	if err != nil {
		t.Fatal(err)
	}
	open := func(b []byte) (Receipt, error) {
		envs, err := ReadEnvelopes(b)
		if err != nil {
			return Receipt{}, err
		}
		st, err := OpenEnvelope(envs[0], l.VerifierKey())
		if err != nil {
			return Receipt{}, err
		}
		return ReceiptFromStatement(st, l.VerifierKey())
	}
	got, err := open(file)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = ReceiptVersion
	if !sameJSON(t, mustJSON(t, got), mustJSON(t, want)) {
		t.Fatalf("receipt from DSSE = %s, want %s", mustJSON(t, got), mustJSON(t, want))
	}

	// The library's verifier, from the PEM alone.
	pemKey, err := PublicKeyPEM(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	libVerify := func(env *dsse.Envelope) error {
		k, err := signerverifier.LoadKey(pemKey)
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
		_, err = ev.Verify(context.Background(), env)
		return err
	}
	if err := libVerify(env); err != nil {
		t.Fatalf("the library's verifier: %v", err)
	}
	payload, _ := env.DecodeB64Payload()
	if !bytes.Contains(payload, []byte(`"predicateType":"`+RunPredicateType+`"`)) && !bytes.Contains(payload, []byte(RunPredicateType)) {
		t.Fatalf("payload %s has no predicate type %s", payload, RunPredicateType)
	}

	// One byte changed anywhere in the file.
	sig := env.Signatures[0].Sig
	for i := range file {
		bad := append([]byte(nil), file...)
		bad[i] ^= 1
		_, err := open(bad)
		lib := errNotRead
		if envs, rerr := ReadEnvelopes(bad); rerr == nil {
			lib = libVerify(envs[0])
		}
		if err == nil || lib == nil {
			envs, _ := ReadEnvelopes(bad)
			p, _ := envs[0].DecodeB64Payload()
			s1, _ := decodeB64(envs[0].Signatures[0].Sig)
			s0, _ := decodeB64(sig)
			if !bytes.Equal(p, payload) || !bytes.Equal(s1, s0) {
				t.Fatalf("byte %d (%q) changed: verifies (ours: %v, library: %v) with another payload or signature", i, file[i], err, lib)
			}
		}
	}
	// Another key does not verify it.
	l2, _ := openAnother(t)
	if _, err := OpenEnvelope(env, l2.VerifierKey()); err == nil {
		t.Fatal("an envelope verified with another log's key")
	}
}

var errNotRead = errors.New("not read as an envelope")

func decodeB64(s string) ([]byte, error) {
	e := dsse.Envelope{Payload: s}
	return e.DecodeB64Payload()
}

// openAnother is a log of its own (open, which the test shadows).
func openAnother(t *testing.T) (*Log, string) { return open(t) }

// sameJSON reports whether a and b are the same JSON value (key order and
// number spelling aside: a predicate's JSON is protojson's).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReceiptStatementExact: a number a predicate cannot carry exactly
// is refused, not rounded.
func TestReceiptStatementExact(t *testing.T) {
	l, _ := open(t)
	r := testReceipt(t, l)
	r.Grants[0].Scope = json.RawMessage(`{"max_amount":9007199254740993}`)
	if _, err := ReceiptStatement(r); err == nil || !strings.Contains(err.Error(), "exactly") {
		t.Fatalf("ReceiptStatement with 2^53+1 = %v, want a refusal", err)
	}
	// A megabyte number: judged on its digits (big.Rat would take seconds).
	r.Grants[0].Scope = json.RawMessage(`{"max_amount":1` + strings.Repeat("0", 1<<20) + `1}`)
	if _, err := ReceiptStatement(r); err == nil || !strings.Contains(err.Error(), "exactly") {
		t.Fatalf("ReceiptStatement with a megabyte number = %v, want a refusal", err)
	}
	r.Grants[0].Scope = json.RawMessage(`{"max_amount":9007199254740992,"rate":0.5,"big":18446744073709551616}`)
	if _, err := ReceiptStatement(r); err != nil {
		t.Fatalf("ReceiptStatement with 2^53: %v", err)
	}
	r.Module = "sha256:00"
	if _, err := ReceiptStatement(r); err == nil {
		t.Fatal("a receipt whose module is no sha256 digest made a statement")
	}
}

// TestReceiptV1: a receipt written before version 2 (by the code of
// 2026-12-03, kept in testdata) still verifies, and one changed byte
// fails it.
func TestReceiptV1(t *testing.T) {
	signed, err := os.ReadFile("testdata/receipt-v1.note")
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := os.ReadFile("testdata/receipt-v1.vkey")
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenReceipt(signed, strings.TrimSpace(string(vkey)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 1 || r.Module != testModule || r.Principal != "alice" || len(r.Build) != 0 {
		t.Fatalf("OpenReceipt = %+v", r)
	}
	bad := bytes.Replace(signed, []byte(`"alice"`), []byte(`"alicf"`), 1)
	if _, err := OpenReceipt(bad, strings.TrimSpace(string(vkey))); err == nil {
		t.Fatal("a changed version 1 receipt verified")
	}
}

// TestReadEnvelopesHostile: what is not an envelope is refused clearly.
func TestReadEnvelopesHostile(t *testing.T) {
	for _, in := range []string{``, `{}`, `[]`, `{"payloadType":"x"}`, `{"payloadType":"x","payload":"eA==","signatures":[]}`,
		`{"payloadType":"x","payload":"eA==","signatures":[{"sig":"eA=="}],"extra":1}`, "{\"payloadType\":\"x\",\"payload\":\"eA==\",\"signatures\":[{\"sig\":\"eA==\"}]}\n{",
		`not json`} {
		if envs, err := ReadEnvelopes([]byte(in)); err == nil {
			t.Errorf("ReadEnvelopes(%q) = %v, want an error", in, envs)
		}
	}
	l, _ := open(t)
	env := &dsse.Envelope{PayloadType: "text/plain", Payload: "eA==", Signatures: []dsse.Signature{{Sig: "eA=="}}}
	if _, err := OpenEnvelope(env, l.VerifierKey()); err == nil || !strings.Contains(err.Error(), "payload type") {
		t.Fatalf("OpenEnvelope of another payload type = %v", err)
	}
}
