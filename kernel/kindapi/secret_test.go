package kindapi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := GrantContext{Dir: dir, LookupEnv: func(k string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "tok", "BLANK": ""}[k]
		return v, ok
	}}
	for _, tc := range []struct {
		src         SecretSource
		value, from string
		field       string // "" = no error
	}{
		{SecretSource{Env: "TOKEN"}, "tok", "env:TOKEN", ""},
		{SecretSource{File: "key"}, "s3cret", "file:key", ""},
		{SecretSource{Env: "NOPE"}, "", "", "x.env"},
		{SecretSource{Env: "BLANK"}, "", "", "x.env"},
		{SecretSource{File: "missing"}, "", "", "x.file"},
		{SecretSource{File: "empty"}, "", "", "x.file"},
		{SecretSource{Env: "TOKEN", File: "key"}, "", "", "x"},
		{SecretSource{}, "", "", "x"},
	} {
		v, from, err := g.ReadSecret(tc.src, "the test secret")
		err = Prefixed("x", err)
		var fe *FieldError
		switch {
		case tc.field == "" && (err != nil || v != tc.value || from != tc.from):
			t.Errorf("ReadSecret(%+v) = %q, %q, %v; want %q, %q", tc.src, v, from, err, tc.value, tc.from)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || v != ""):
			t.Errorf("ReadSecret(%+v) = %q, %v; want a FieldError on %s", tc.src, v, err, tc.field)
		}
	}
	// The secret never reaches an error or a formatted scope.
	s := NewSecret("s3cret")
	if fmt.Sprintf("%v %+v %#v %s", s, s, s, s) != "[redacted] [redacted] [redacted] [redacted]" {
		t.Error("a Secret formats its value")
	}
}
