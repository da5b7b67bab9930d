package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// fuzzLog returns a log that can sign (no database) with a fixed key, so
// that fuzzing is deterministic.
func fuzzLog(t testing.TB) *Log {
	t.Helper()
	skey, _, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), keyName)
	if err != nil {
		t.Fatal(err)
	}
	s, v, vkey, err := parseKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &Log{signer: s, verif: v, vkey: vkey}
}

func signCheckpoint(t testing.TB, l *Log, c Checkpoint) []byte {
	t.Helper()
	b, err := note.Sign(&note.Note{Text: c.text()}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseCheckpointText: a checkpoint's text parses only in its
// canonical form, so one tree head has one text.
func FuzzParseCheckpointText(f *testing.F) {
	f.Add(Checkpoint{Size: 3}.text())
	f.Add(Checkpoint{Size: 1 << 40, Hash: [32]byte{1, 2, 3}}.text())
	for _, s := range []string{
		"mandate audit log v1\n03\nAAAA\n", "mandate audit log v1\n-1\n\n", "mandate audit log v1\n1\n" + strings.Repeat("A", 43) + "=\n",
		"mandate audit log v1\n1\n" + strings.Repeat("A", 43) + "B\n", "", "mandate audit log v1\n1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parseCheckpointText(text)
		if err != nil {
			return
		}
		if c.Size < 0 || c.text() != text {
			t.Fatalf("parseCheckpointText(%q) = %+v, whose text is %q", text, c, c.text())
		}
	})
}

// FuzzOpenCheckpoint: a signed checkpoint opens only byte for byte as
// signed; anything else is an error, never a panic.
func FuzzOpenCheckpoint(f *testing.F) {
	l := fuzzLog(f)
	good := signCheckpoint(f, l, Checkpoint{Size: 5, Hash: [32]byte{9}})
	f.Add(good)
	f.Add(append(bytes.Clone(good), '\n'))
	f.Add(bytes.Replace(good, []byte("— "), []byte("-- "), 1))
	f.Add([]byte("mandate audit log v1\n5\n\n— x AAAA\n"))
	f.Fuzz(func(t *testing.T, signed []byte) {
		c, err := OpenCheckpoint(signed, l.vkey)
		if err != nil {
			return
		}
		// What opens is exactly what the key signed for that head.
		if again := signCheckpoint(t, l, c); !bytes.Equal(again, signed) {
			t.Fatalf("OpenCheckpoint(%q) = %+v, but that head signs as %q", signed, c, again)
		}
	})
}

// FuzzOpenReceipt: a receipt from a file never panics OpenReceipt; one
// that opens is exactly what the key signed.
func FuzzOpenReceipt(f *testing.F) {
	l := fuzzLog(f)
	cp := signCheckpoint(f, l, Checkpoint{Size: 2})
	good, err := l.SignReceipt(Receipt{Run: "r1", Module: "sha256:00", Principal: "alice",
		Grants:     []ReceiptGrant{{Name: "web", Kind: "net", Scope: json.RawMessage(`{"origin":"https://a.example"}`)}},
		Tasks:      []ReceiptTask{{ID: "t1", Module: "m", State: "exited", Label: json.RawMessage(`{"conf":[],"integ":[]}`)}},
		Checkpoint: string(cp)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"alice"`), []byte(`"mallory"`), 1))
	f.Add([]byte("{}\n\n— mandate-audit AAAA\n"))
	f.Fuzz(func(t *testing.T, signed []byte) {
		r, err := OpenReceipt(signed, l.vkey)
		if err != nil {
			return
		}
		if r.Version != ReceiptVersion {
			t.Fatalf("OpenReceipt(%q): version %d", signed, r.Version)
		}
		if _, err := note.Open(signed, note.VerifierList(l.verif)); err != nil {
			t.Fatalf("OpenReceipt(%q) accepted a note that does not verify: %v", signed, err)
		}
	})
}

// FuzzReceiptRoundTrip: whatever a receipt holds (names, scopes, labels
// from the run), SignReceipt then OpenReceipt gives it back.
func FuzzReceiptRoundTrip(f *testing.F) {
	f.Add("r1", "alice", "web", `{"origin":"https://a.example"}`, "request.method == \"GET\"", true)
	f.Add("", "\x00\u2028\n— x", "", `[1, 2]`, "", false)
	f.Add("r\xff", "bob\n\n", "a b", `{"a":"\ud800"}`, "x\ny", true)
	l := fuzzLog(f)
	cp := string(signCheckpoint(f, l, Checkpoint{Size: 1}))
	f.Fuzz(func(t *testing.T, run, principal, name, scope, when string, audited bool) {
		if !json.Valid([]byte(scope)) {
			scope = `{"raw":` + string(must(json.Marshal(scope))) + `}`
		}
		in := Receipt{
			Run: run, Principal: principal, Module: "sha256:00", Checkpoint: cp,
			Grants: []ReceiptGrant{{Name: name, Kind: "net", Scope: json.RawMessage(scope), When: []string{when}, Audited: audited}},
			Extra:  json.RawMessage(scope),
		}
		signed, err := l.SignReceipt(in)
		if err != nil {
			return // a string the note format cannot carry
		}
		out, err := OpenReceipt(signed, l.vkey)
		if err != nil {
			t.Fatalf("OpenReceipt of a signed receipt: %v\n%s", err, signed)
		}
		// JSON replaces invalid UTF-8; compare with what was signed.
		var want Receipt
		if err := json.Unmarshal(must(json.Marshal(in)), &want); err != nil {
			t.Fatal(err)
		}
		want.Version = ReceiptVersion
		norm := func(r *Receipt) {
			r.Extra = compactJSON(r.Extra)
			for i := range r.Grants {
				r.Grants[i].Scope = compactJSON(r.Grants[i].Scope)
			}
		}
		norm(&want)
		norm(&out)
		if !reflect.DeepEqual(out, want) {
			t.Fatalf("round trip differs:\n%+v\n%+v", out, want)
		}
		// One changed byte in the signature fails.
		bad := bytes.Clone(signed)
		i := bytes.LastIndex(bad, []byte(" ")) + 1
		sig, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(bad[i:])))
		if len(sig) > 8 {
			sig[8] ^= 1
			bad = append(bad[:i], base64.StdEncoding.EncodeToString(sig)+"\n"...)
			if _, err := OpenReceipt(bad, l.vkey); err == nil {
				t.Fatalf("a receipt with a changed signature opened")
			}
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func compactJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// FuzzParseKey: a key file's content is parsed without panicking; a key
// that parses signs notes its verifier key opens.
func FuzzParseKey(f *testing.F) {
	skey, _, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 64)), keyName)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(skey)
	f.Add(strings.Replace(skey, "PRIVATE+KEY+", "PRIVATE+KEY+x+", 1))
	f.Add("PRIVATE+KEY+a+00000000+AQ==")
	f.Add("")
	f.Fuzz(func(t *testing.T, skey string) {
		s, _, vkey, err := parseKey(skey)
		if err != nil {
			return
		}
		signed, err := note.Sign(&note.Note{Text: "x\n"}, s)
		if err != nil {
			t.Fatalf("parseKey(%q): signing: %v", skey, err)
		}
		if _, err := OpenCheckpoint(signed, vkey); err == nil || !strings.Contains(err.Error(), "malformed checkpoint") {
			t.Fatalf("parseKey(%q): the note does not verify with %s: %v", skey, vkey, err)
		}
	})
}
