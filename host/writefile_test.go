package host

import (
	"os"
	"testing"
)

// TestWriteFileAtomicDevice: a device is written to, never replaced (a
// rename over /dev/null replaced the machine's /dev/null with a file).
func TestWriteFileAtomicDevice(t *testing.T) {
	before, err := os.Stat(os.DevNull)
	if err != nil || before.Mode()&os.ModeDevice == 0 {
		t.Skipf("%s is not a device here: %v", os.DevNull, err)
	}
	if err := WriteFileAtomic(os.DevNull, []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(os.DevNull)
	if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
		t.Fatalf("%s was replaced: %v %v", os.DevNull, after.Mode(), err)
	}
	if err := WriteFileAtomic(t.TempDir(), []byte("x"), 0o644); err == nil {
		t.Error("writing over a directory succeeded")
	}
}
