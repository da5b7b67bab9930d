package mandate_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// TestGoInstallPublished publishes this commit as a release would (the
// guest SDK module, then the runtime, whose go.sum gains the released
// SDK's sums) into a module proxy in a folder, and runs
//
//	go install github.com/mandatevm/mandate/cmd/mandate@v0.1.0
//
// against it with an empty module cache, outside any workspace, as a
// person would: the published module must build without this
// repository's go.work or any replace. Every other module comes from this
// machine's module cache, served as a second proxy; nothing is fetched
// from the network. The commit is HEAD: uncommitted changes are not in it.
func TestGoInstallPublished(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate from a published module")
	}
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git")); err != nil {
		t.Skip("not a git checkout: the release is made from a commit")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	var env struct{ GOMODCACHE, GOCACHE string }
	out, err := exec.Command(goBin, "env", "-json", "GOMODCACHE", "GOCACHE").Output()
	if err != nil || json.Unmarshal(out, &env) != nil {
		t.Fatalf("go env: %v", err)
	}
	const version = "v0.1.0"
	proxy := t.TempDir()

	sdk := module.Version{Path: "github.com/mandatevm/mandate/guest-sdk", Version: version}
	var sdkZip bytes.Buffer
	if err := modzip.CreateFromVCS(&sdkZip, sdk, repo, "HEAD", "guest-sdk"); err != nil {
		t.Fatal(err)
	}
	sdkMod := zipFile(t, sdkZip.Bytes(), sdk, "go.mod")
	publish(t, proxy, sdk, sdkZip.Bytes(), sdkMod)

	rt := module.Version{Path: "github.com/mandatevm/mandate", Version: version}
	var rtZip bytes.Buffer
	if err := modzip.CreateFromVCS(&rtZip, rt, repo, "HEAD", ""); err != nil {
		t.Fatal(err)
	}
	zipName := filepath.Join(t.TempDir(), "sdk.zip")
	if err := os.WriteFile(zipName, sdkZip.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	h1, err := dirhash.HashZip(zipName, dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}
	modH1, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(sdkMod)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sums := string(zipFile(t, rtZip.Bytes(), rt, "go.sum")) +
		sdk.Path + " " + version + " " + h1 + "\n" + sdk.Path + " " + version + "/go.mod " + modH1 + "\n"
	rtZipBytes := replaceInZip(t, rtZip.Bytes(), rt, "go.sum", []byte(sums))
	rtMod := zipFile(t, rtZipBytes, rt, "go.mod")
	if bytes.Contains(rtMod, []byte("\nreplace")) {
		t.Fatal("go.mod has a replace directive: go install ...@version refuses such a module")
	}
	publish(t, proxy, rt, rtZipBytes, rtMod)

	gobin := t.TempDir()
	// Its own limit, under go test's: a cold build of mandate takes
	// minutes on two busy cores; a hang says what hung.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "install", "github.com/mandatevm/mandate/cmd/mandate@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(env.GOMODCACHE, "cache", "download")),
		"GOMODCACHE="+t.TempDir(), "GOCACHE="+env.GOCACHE, "GOBIN="+gobin, "GOWORK=off",
		"GOSUMDB=off", "GOFLAGS=-modcacherw -trimpath", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "HOME="+t.TempDir())
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("not done in 15 minutes: %w", ctx.Err())
		}
		t.Fatalf("go install: %v\n%s", err, b)
	}
	b, err := exec.Command(filepath.Join(gobin, "mandate"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("mandate version: %v\n%s", err, b)
	}
	if !strings.HasPrefix(string(b), "mandate "+version+"\n") ||
		!strings.Contains(string(b), "guest SDK  github.com/mandatevm/mandate/guest-sdk "+version+" h1:") {
		t.Errorf("mandate version printed:\n%s", b)
	}
}

// publish writes a module version into a GOPROXY folder.
func publish(t *testing.T, proxy string, m module.Version, zipBytes, goMod []byte) {
	t.Helper()
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":              []byte(m.Version + "\n"),
		m.Version + ".info": []byte(`{"Version":"` + m.Version + `","Time":"2026-12-01T00:00:00Z"}`),
		m.Version + ".mod":  goMod,
		m.Version + ".zip":  zipBytes,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// zipFile is the content of name in a module zip.
func zipFile(t *testing.T, b []byte, m module.Version, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open(m.Path + "@" + m.Version + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// replaceInZip returns a module zip with name's content replaced.
func replaceInZip(t *testing.T, b []byte, m module.Version, name string, data []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	target := m.Path + "@" + m.Version + "/" + name
	for _, f := range zr.File {
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == target {
			w.Write(data)
			continue
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
