package sandbox

import (
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
