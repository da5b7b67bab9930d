package sandbox

import (
	"context"
	"strings"
	"testing"
)

func TestIsDigest(t *testing.T) {
	if !IsDigest(Digest([]byte("x"))) {
		t.Fatal("Digest's output is not a digest")
	}
	for _, bad := range []string{"", "sha256:", "sha256:" + strings.Repeat("A", 64), "sha512:" + strings.Repeat("a", 64),
		"sha256:" + strings.Repeat("a", 63), "sha256:" + strings.Repeat("g", 64), "sha256:" + strings.Repeat("a", 65)} {
		if IsDigest(bad) {
			t.Errorf("IsDigest(%q) = true", bad)
		}
	}
}

func TestCheckHost(t *testing.T) {
	fn := func(context.Context, Memory, []uint64) {}
	ok := []HostFunc{{Name: "a", Fn: fn}, {Name: "b", Params: Values(MaxHostParams), Fn: fn}, {Name: "c", Fn: fn, Params: []Param{
		{Name: "h", Kind: Handle}, {Name: "p", Kind: In, Limit: 8}, {Name: "n", Kind: Len},
		{Name: "b", Kind: Buf, Limit: 8}, {Name: "bn", Kind: Len}, {Name: "o", Kind: Out, Size: 4},
	}}}
	if err := CheckHost("m", ok); err != nil {
		t.Fatalf("valid module: %v", err)
	}
	for _, tc := range []struct {
		module string
		funcs  []HostFunc
		want   string
	}{
		{"", ok, "empty host module name"},
		{"m", []HostFunc{{Name: "", Fn: fn}}, "function with empty name"},
		{"m", []HostFunc{{Name: "a"}}, "m.a: nil Fn"},
		{"m", []HostFunc{{Name: "a", Params: Values(MaxHostParams + 1), Fn: fn}}, "17 params"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Name: "p", Kind: In, Limit: 8}}, Fn: fn}}, "m.a: parameter 0 (p): in is not followed by its len"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Name: "p", Kind: Buf, Limit: 8}, {Kind: Value}}, Fn: fn}}, "buf is not followed by its len"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Kind: Value}, {Name: "n", Kind: Len}}, Fn: fn}}, "parameter 1 (n): a len after no in or buf"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Name: "n", Kind: Len}}, Fn: fn}}, "a len after no in or buf"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Name: "p", Kind: In}, {Kind: Len}}, Fn: fn}}, "in with limit 0"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Name: "o", Kind: Out}}, Fn: fn}}, "out of size 0"},
		{"m", []HostFunc{{Name: "a", Params: []Param{{Name: "x", Kind: Out + 1}}, Fn: fn}}, "ParamKind(6)"},
		{"m", []HostFunc{{Name: "a", Fn: fn}, {Name: "a", Fn: fn}}, "m.a registered twice"},
	} {
		if err := CheckHost(tc.module, tc.funcs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckHost(%q, %v) = %v, want %q", tc.module, tc.funcs, err, tc.want)
		}
	}
}
