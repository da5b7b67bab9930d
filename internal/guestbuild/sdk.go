package guestbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mandatevm/mandate/internal/sdkembed"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// SDKModule is the guest SDK's module path.
const SDKModule = sdkembed.Module

// SDKDir is the guest SDK a C or Rust guest in dir builds against: the
// guest-sdk folder of the Mandate checkout dir is in, if any (so the
// repository's own guests build against its tree), else the copy embedded
// in this binary, unpacked into the cache (see package sdkembed).
func SDKDir(dir string, opt Options) (string, error) {
	if sdk := checkoutSDK(dir); sdk != "" {
		return sdk, nil
	}
	return embeddedSDK(opt)
}

// checkoutSDK is the guest-sdk folder of the checkout dir is in, or "".
func checkoutSDK(dir string) string {
	for d := dir; ; {
		sdk := filepath.Join(d, "guest-sdk")
		if b, err := os.ReadFile(filepath.Join(sdk, "go.mod")); err == nil {
			if f, err := modfile.ParseLax("go.mod", b, nil); err == nil && f.Module != nil && f.Module.Mod.Path == SDKModule {
				return sdk
			}
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// embeddedSDK unpacks the embedded SDK into the cache and returns its
// folder.
func embeddedSDK(opt Options) (string, error) {
	cacheDir := opt.CacheDir
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	dir, repaired, err := sdkembed.Extract(filepath.Join(cacheDir, "sdk"))
	if err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	if repaired && opt.Note != nil {
		opt.Note(fmt.Sprintf("the guest SDK copy in %s had been changed; it was unpacked afresh from this binary", dir))
	}
	return dir, nil
}

// sdkEnv is the environment a Go guest in dir builds with. A guest whose
// module requires the SDK builds as the go tool would build it when the go
// tool can reach that SDK: through a workspace (a go.work, as in this
// repository), a replace in go.mod, the module cache or a proxy. When it
// cannot, the build uses the SDK embedded in this binary: unpacked into the
// cache and wired in by a go.work of its own (GOWORK, in the cache), which
// makes the unpacked copy the version the guest requires. The guest's
// go.mod and go.sum are never written.
func sdkEnv(ctx context.Context, dir, goBin string, opt Options, cacheDir string) ([]string, error) {
	env := buildEnv()
	cmd := exec.CommandContext(ctx, goBin, "env", "-json", "GOMOD", "GOWORK", "GOVERSION")
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return env, nil // the build says what is wrong
	}
	var ge struct{ GOMOD, GOWORK, GOVERSION string }
	if json.Unmarshal(out, &ge) != nil || ge.GOMOD == "" || ge.GOMOD == os.DevNull {
		return env, nil
	}
	if ge.GOWORK != "" && ge.GOWORK != "off" {
		// A workspace of the person's (mandate sdk --work writes one).
		return buildEnv(setAsideModMod(opt, "it builds in the workspace "+ge.GOWORK)...), nil
	}
	gomod, err := os.ReadFile(ge.GOMOD)
	if err != nil {
		return env, nil
	}
	f, err := modfile.Parse(ge.GOMOD, gomod, nil)
	if err != nil {
		return env, nil
	}
	for _, r := range f.Replace {
		if r.Old.Path == SDKModule {
			return env, nil // the guest's own choice
		}
	}
	required := ""
	for _, r := range f.Require {
		if r.Mod.Path == SDKModule {
			required = r.Mod.Version
		}
	}
	if required == "" {
		return env, nil
	}
	// Reachable? go mod download looks in the module cache first.
	dl := exec.CommandContext(ctx, goBin, "mod", "download", "-json", SDKModule+"@"+required)
	dl.Dir = dir
	dl.Env = env
	var dlOut bytes.Buffer
	dl.Stdout = &dlOut
	if dl.Run() == nil {
		return env, nil
	}
	sdk, err := embeddedSDK(Options{CacheDir: cacheDir, Note: opt.Note})
	if err != nil {
		return nil, err
	}
	modRoot := filepath.Dir(ge.GOMOD)
	goVersion := "1.26.0"
	if f.Go != nil && semver.Compare("v"+f.Go.Version, "v"+goVersion) > 0 {
		goVersion = f.Go.Version
	}
	work := fmt.Sprintf("go %s\n\n// Written by mandate build for %s: the guest SDK %s is not\n"+
		"// available to the go tool, so the copy embedded in mandate is used.\nuse (\n\t%s\n\t%s\n)\n\nreplace %s %s => %s\n",
		goVersion, modRoot, required, quoteWorkPath(modRoot), quoteWorkPath(sdk), SDKModule, required, quoteWorkPath(sdk))
	sum := sha256.Sum256([]byte(modRoot + "\x00" + sdk))
	workDir := filepath.Join(cacheDir, "sdk", "work", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("guestbuild: %w", err)
	}
	workFile := filepath.Join(workDir, "go.work")
	old, err := os.ReadFile(workFile)
	fresh := err != nil || string(old) != work
	if fresh {
		tmp := workFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(work), 0o600); err != nil {
			return nil, fmt.Errorf("guestbuild: %w", err)
		}
		if err := os.Rename(tmp, workFile); err != nil {
			return nil, fmt.Errorf("guestbuild: %w", err)
		}
	}
	if opt.Note != nil && fresh {
		// Said once, as the folder is first built with this copy, not at
		// every run of it.
		d, _ := sdkembed.Digest()
		msg := fmt.Sprintf("%s %s is not available to the go tool; building with the copy embedded in mandate (%s %s, %s)",
			SDKModule, required, sdkembed.Version, d, sdk)
		if required != sdkembed.Version {
			msg += fmt.Sprintf("; note the guest requires %s", required)
		}
		opt.Note(msg)
	}
	extra := append([]string{"GOWORK=" + workFile}, setAsideModMod(opt, "the embedded SDK is used through a workspace")...)
	return buildEnv(extra...), nil
}

// setAsideModMod returns the GOFLAGS setting, if any, that sets aside a
// -mod=mod of the person's GOFLAGS, saying so (why says why the build is in
// a workspace): it would fail the build, since in a workspace -mod may only
// be readonly or vendor.
func setAsideModMod(opt Options, why string) []string {
	flags := strings.Fields(os.Getenv("GOFLAGS"))
	if !slices.Contains(flags, "-mod=mod") {
		return nil
	}
	kept := slices.DeleteFunc(flags, func(f string) bool { return f == "-mod=mod" })
	if opt.Note != nil {
		opt.Note("GOFLAGS' -mod=mod is set aside for this build: " + why + ", where -mod may only be readonly or vendor")
	}
	return []string{"GOFLAGS=" + strings.Join(kept, " ")}
}

// quoteWorkPath quotes a path for a go.work line when it needs it.
func quoteWorkPath(p string) string {
	if strings.ContainsAny(p, " \t\"'`\\") {
		b, _ := json.Marshal(p)
		return string(b)
	}
	return p
}

// UnpackSDK unpacks the guest SDK embedded in this binary into the cache
// (once; checked by its hash each time) and returns its folder: go.mod and
// the Go packages at its root, rust/ (the mandate crate) and c/ (mandate.h).
func UnpackSDK(opt Options) (string, error) { return embeddedSDK(opt) }

// RustCrate is the path a Cargo.toml in dir names for the mandate crate,
// for cargo: in a checkout of Mandate, its guest-sdk/rust, relative to dir;
// elsewhere the rust/ folder of the copy this binary carries, unpacked into
// the cache (absolute). dir need not exist yet.
func RustCrate(dir string, opt Options) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	if sdk := checkoutSDK(abs); sdk != "" {
		if rel, err := filepath.Rel(abs, filepath.Join(sdk, "rust")); err == nil {
			return rel, nil
		}
	}
	sdk, err := embeddedSDK(opt)
	if err != nil {
		return "", err
	}
	return filepath.Join(sdk, "rust"), nil
}
