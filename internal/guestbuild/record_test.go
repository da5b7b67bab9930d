package guestbuild

import (
	"strings"
	"testing"
)

// minimalModule is a module with an empty code section.
var minimalModule = []byte("\x00asm\x01\x00\x00\x00\x0a\x01\x00")

func testRecord() Record {
	files := []RecordFile{
		{Path: "go.mod", Digest: digestOf([]byte("module x\n"))},
		{Path: "main.go", Digest: digestOf([]byte("package main\n"))},
	}
	return Record{
		Version:   RecordVersion,
		Lang:      LangGo,
		Toolchain: map[string]string{"go": "go1.26.8"},
		SDK:       RecordSDK{Version: "checkout", Digest: digestOf(nil)},
		Mode:      ModeCommand,
		Flags:     []string{"-trimpath"},
		Source:    RecordSource{Digest: TreeDigest(files), Files: files},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := testRecord()
	b, err := appendRecord(minimalModule, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckModule(b); err != nil {
		t.Fatalf("CheckModule: %v", err)
	}
	got, ok, err := ReadRecord(b)
	if err != nil || !ok {
		t.Fatalf("ReadRecord = %v, %v", ok, err)
	}
	if d := r.Diff(got); len(d) != 0 {
		t.Fatalf("round trip differs: %s", strings.Join(d, "; "))
	}
	s, err := StripRecord(b)
	if err != nil || string(s) != string(minimalModule) {
		t.Fatalf("StripRecord = %x, %v; want %x", s, err, minimalModule)
	}
	if _, ok, err := ReadRecord(minimalModule); ok || err != nil {
		t.Fatalf("ReadRecord(no section) = %v, %v; want false, nil", ok, err)
	}
}
