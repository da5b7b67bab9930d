package host_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/sandbox"
)

// withSection is wasm with a custom section appended.
func withSection(wasm []byte, name string, body []byte) []byte {
	n := binary.AppendUvarint(nil, uint64(len(name)))
	n = append(n, name...)
	out := append(append([]byte(nil), wasm...), 0)
	out = binary.AppendUvarint(out, uint64(len(n)+len(body)))
	return append(append(out, n...), body...)
}

// TestReceiptBuildRecord: a run's receipt carries its module's build
// record, in both forms; a module whose record is forged badly gets no
// receipt: its run is refused before it starts, with the reason.
func TestReceiptBuildRecord(t *testing.T) {
	m := benefits(t, "alice.hcl")
	wasm, _, err := guestbuild.Build(context.Background(), m.ModulePath, guestbuild.Options{CacheDir: filepath.Join(testCache(), "guests"), MainEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := guestbuild.ReadRecord(wasm)
	if err != nil || !ok {
		t.Fatalf("the built module's record: %v, %v", ok, err)
	}
	h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: testCache()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, format := range []string{host.ReceiptNote, host.ReceiptDSSE} {
		path := filepath.Join(t.TempDir(), "receipt")
		r, err := h.Start(context.Background(), host.RunSpec{Manifest: m, Module: wasm, Receipt: path, ReceiptFormat: format})
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Wait(context.Background())
		if err != nil || out.ReceiptErr != nil {
			t.Fatalf("%s: %v, %v", format, err, out.ReceiptErr)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got audit.Receipt
		if format == host.ReceiptNote {
			got, err = audit.OpenReceipt(b, h.Log().VerifierKey())
		} else {
			envs, rerr := audit.ReadEnvelopes(b)
			if rerr != nil || len(envs) != 2 {
				t.Fatalf("dsse: %d envelopes, %v", len(envs), rerr)
			}
			st, oerr := audit.OpenEnvelope(envs[0], h.Log().VerifierKey())
			if oerr != nil {
				t.Fatal(oerr)
			}
			got, err = audit.ReceiptFromStatement(st, h.Log().VerifierKey())
			prov, perr := audit.OpenEnvelope(envs[1], h.Log().VerifierKey())
			if perr != nil {
				t.Fatal(perr)
			}
			want, _ := host.ProvenanceStatement("x", sandbox.Digest(wasm), rec)
			if !host.SameProvenance(prov, want) {
				t.Fatalf("the bundle's provenance is not the module's record's")
			}
			// What the provenance says is the record, nothing less.
			mod, back, perr := host.ProvenanceRecord(prov)
			if perr != nil || mod != sandbox.Digest(wasm) {
				t.Fatalf("ProvenanceRecord = %s, %v", mod, perr)
			}
			if a, b := mustJSON(t, back), mustJSON(t, rec); a != b {
				t.Fatalf("ProvenanceRecord:\n%s\nwant\n%s", a, b)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		back, err := guestbuild.ParseRecord(got.Build)
		if err != nil || back.Source.Digest != rec.Source.Digest || got.Module != sandbox.Digest(wasm) {
			t.Fatalf("%s: the receipt's record %+v (%v), want the module's %s", format, back, err, rec.Source.Digest)
		}
	}

	code, err := guestbuild.StripRecord(wasm)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"bad JSON":       `{"version":1,`,
		"a flag field":   `{"version":1,"lang":"go","mode":"command","toolexec":"/bin/sh"}`,
		"a control char": `{"version":1,"lang":"go\u001b[2J","mode":"command"}`,
	} {
		bad := withSection(code, guestbuild.SectionName, []byte(body))
		_, err := h.Start(context.Background(), host.RunSpec{Manifest: m, Module: bad, Receipt: filepath.Join(t.TempDir(), "r")})
		if err == nil || !strings.Contains(err.Error(), "build record") {
			t.Errorf("%s: Start = %v, want a refusal naming the build record", name, err)
		}
	}
	// Without a receipt, the same module runs: the record is read only
	// for a receipt.
	bad := withSection(code, guestbuild.SectionName, []byte(`{`))
	r, err := h.Start(context.Background(), host.RunSpec{Manifest: m, Module: bad})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
