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
	ok := []HostFunc{{Name: "a", Params: 0, Fn: fn}, {Name: "b", Params: MaxHostParams, Fn: fn}}
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
		{"m", []HostFunc{{Name: "a", Params: -1, Fn: fn}}, "-1 params"},
		{"m", []HostFunc{{Name: "a", Params: MaxHostParams + 1, Fn: fn}}, "17 params"},
		{"m", []HostFunc{{Name: "a", Fn: fn}, {Name: "a", Fn: fn}}, "m.a registered twice"},
	} {
		if err := CheckHost(tc.module, tc.funcs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckHost(%q, %v) = %v, want %q", tc.module, tc.funcs, err, tc.want)
		}
	}
}
