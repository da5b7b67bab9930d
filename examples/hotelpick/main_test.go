package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
	"github.com/mandatevm/mandate/internal/testengine"
)

// TestHotelPick runs the example as `go run ./examples/hotelpick` does:
// the honest model's answer, from the catalogue, is the result; the
// compromised model's, written after reading the injected review, is
// refused with EFLOW naming hotels:reviews.
func TestHotelPick(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := story(context.Background(), &out, &errs, t.TempDir()); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	t.Logf("\n%s", &out)
}

// TestHotelPickAcceptsUntrusted: the same honest run under
// result { accepts_untrusted = false } is refused, naming the
// catalogue's taint: why the manifest names the taints it refuses.
func TestHotelPickAcceptsUntrusted(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	manifest := rewritten(t, `refuses_taints = ["hotels:reviews*"]`, `accepts_untrusted = false`)
	site, m := startSite(), model(false)
	defer site.Close()
	defer m.Close()
	var errs bytes.Buffer
	rep, err := run(context.Background(), &errs, t.TempDir(), manifest, site.URL, m.URL())
	if err != nil {
		t.Fatalf("%v\n%s", err, &errs)
	}
	if err := checkRefused(rep, "hotels:catalogue"); err != nil {
		t.Error(err)
	}
}

// TestHotelPickCheck: mandate check says which capabilities' data the
// answer refuses: the reviews', not the catalogue's or the model's.
func TestHotelPickCheck(t *testing.T) {
	dir, err := exampledir.Find("hotelpick.hcl", "examples/hotelpick")
	if err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	args := []string{"check", filepath.Join(dir, "hotelpick.hcl"), "--var", "model=http://127.0.0.1:1",
		"--var", "model_name=picker", "--var", "site=http://127.0.0.1:2"}
	if code := cli.Main(args, nil, &out, &errs); code != 0 {
		t.Fatalf("mandate check exited %d: %s", code, &errs)
	}
	for _, line := range []string{
		"result: refuses_taints {hotels:reviews*}",
		"  hotels:catalogue from catalogue: accepted",
		"  hotels:reviews from reviews: refused",
		"  an answer written after reading from reviews is refused (EFLOW naming the taint)",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("mandate check:\n%s\nwant a line %q", &out, line)
		}
	}
}

// rewritten writes the manifest with from replaced by to, its module
// where it is, and returns its path.
func rewritten(t *testing.T, from, to string) string {
	t.Helper()
	dir, err := exampledir.Find("hotelpick.hcl", "examples/hotelpick")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "hotelpick.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.NewReplacer(`module    = "agent"`, `module    = "`+filepath.ToSlash(filepath.Join(dir, "agent"))+`"`, from, to).Replace(string(src))
	if !strings.Contains(m, to) || strings.Contains(m, `"agent"`) {
		t.Fatalf("the manifest has no %q", from)
	}
	p := filepath.Join(t.TempDir(), "hotelpick.hcl")
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadme: the README shows the manifest as it is.
func TestReadme(t *testing.T) {
	dir, err := exampledir.Find("hotelpick.hcl", "examples/hotelpick")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, "hotelpick.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```hcl\n"+string(m)+"```\n") {
		t.Error("README.md does not show hotelpick.hcl as it is")
	}
}
