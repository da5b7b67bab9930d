package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		"/home/a/.cache/mandate/guests/sdk/guest-sdk-0123/rust": `"/home/a/.cache/mandate/guests/sdk/guest-sdk-0123/rust"`,
		`C:\Users\a "b"`: `"C:\\Users\\a \"b\""`,
		"a\tb\x01":       `"a\u0009b\u0001"`,
	} {
		if got := TOMLString(in); got != want {
			t.Errorf("TOMLString(%q) = %s, want %s", in, got, want)
		}
		// What Cargo.toml holds reads back as it was written.
		toml := "[dependencies]\nmandate = { path = " + TOMLString(in) + " }\n"
		if got, ok := CargoMandatePath([]byte(toml)); !ok || got != in {
			t.Errorf("CargoMandatePath(%q) = %q, %v; want %q", toml, got, ok, in)
		}
	}
}

func TestCargoMandatePath(t *testing.T) {
	for _, tc := range []struct {
		toml, path string // path "" when there is none
	}{
		{"[package]\nname = \"a\"\n[dependencies]\nmandate = { path = \"../guest-sdk/rust\" }\n", "../guest-sdk/rust"},
		{"[dependencies]\n  mandate = {version = \"0.1\", path='/x/rust'} # the SDK\n", "/x/rust"},
		{"[ dependencies ]\n\"mandate\" = { path = \"/x\" }\n", "/x"},
		{"[dependencies.mandate]\nversion = \"0.1\"\npath = \"/y/rust\"\n", "/y/rust"},
		{"[dependencies]\nother = { path = \"/o\" }\n", ""},
		{"[dev-dependencies]\nmandate = { path = \"/dev\" }\n", ""},
		{"[package]\nmandate = { path = \"/p\" }\n", ""},
		{"[dependencies]\n# mandate = { path = \"/commented\" }\n", ""},
		{"[dependencies]\nmandate = \"0.1\"\n", ""},
	} {
		got, ok := CargoMandatePath([]byte(tc.toml))
		if ok != (tc.path != "") || got != tc.path {
			t.Errorf("CargoMandatePath(%q) = %q, %v; want %q", tc.toml, got, ok, tc.path)
			continue
		}
		out, ok2 := SetCargoMandatePath([]byte(tc.toml), "/new/rust")
		if ok2 != ok {
			t.Errorf("SetCargoMandatePath(%q): %v, want %v", tc.toml, ok2, ok)
		}
		if !ok {
			continue
		}
		if p, _ := CargoMandatePath(out); p != "/new/rust" {
			t.Errorf("after SetCargoMandatePath(%q): path %q\n%s", tc.toml, p, out)
		}
		// Every other byte stays.
		before, _, _ := strings.Cut(tc.toml, tc.path)
		if !strings.HasPrefix(string(out), before[:len(before)-1]) {
			t.Errorf("SetCargoMandatePath(%q) changed what precedes the path:\n%s", tc.toml, out)
		}
	}
}

// TestNewRust: a Rust tool's Cargo.toml names the crate Options.RustSDK
// gives, else the checkout's.
func TestNewRust(t *testing.T) {
	for sdk, want := range map[string]string{
		"":                            DefaultRustSDK,
		"/cache/sdk/guest-sdk-x/rust": "/cache/sdk/guest-sdk-x/rust",
	} {
		dir := filepath.Join(t.TempDir(), "tool")
		files, err := New(Options{Dir: dir, Lang: "rust", RustSDK: sdk})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(files, " "), "Cargo.toml") {
			t.Fatalf("New wrote %q", files)
		}
		b, err := os.ReadFile(filepath.Join(dir, "Cargo.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := CargoMandatePath(b); !ok || got != want {
			t.Errorf("RustSDK %q: Cargo.toml names %q, want %q\n%s", sdk, got, want, b)
		}
	}
}
