// Package scaffold writes a new tool's folder for "mandate new": the guest
// in Go, Rust or C, its build file, a manifest granting the one capability
// asked for (each field commented), a README, and a test that runs the
// tool with "mandate run" against a loopback fixture.
//
// The files are text/template templates under templates/: common/ (the
// manifest, README and test, per capability kind) and one folder per
// language (the guest per capability kind, and the build files). New
// refuses to write into a folder that exists, so it never overwrites a
// person's files.
package scaffold

import (
	"bytes"
	"cmp"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/mandatevm/mandate/internal/sdkembed"
)

//go:embed templates
var templates embed.FS

// Langs and Caps are what New accepts.
var (
	Langs = []string{"go", "rust", "c"}
	Caps  = []string{"net", "data", "pay"}
)

// Options say what to write.
type Options struct {
	Dir  string // the folder to create; its base name is the tool's name
	Lang string // "go" (default), "rust" or "c"
	Cap  string // "net" (default), "data" or "pay"
	// RustSDK is, for a Rust tool, the folder of the mandate crate that
	// Cargo.toml names for cargo (the guest SDK's rust/): absolute, or
	// relative to Dir. Default DefaultRustSDK, which exists only in a
	// checkout of Mandate ("mandate sdk --work" rewrites it).
	RustSDK string
}

// DefaultRustSDK is Options.RustSDK's default: the SDK of a checkout
// holding the tool's folder at its top.
const DefaultRustSDK = "../guest-sdk/rust"

// data is what the templates see.
type data struct {
	Name       string // the tool's name: the folder's base name
	Ident      string // Name as an identifier (a Rust crate, a Go module's last element)
	Lang, Cap  string
	SDKModule  string
	SDKVersion string
	CapName    string // the capability's name in the manifest
	EnvPrefix  string // Name upper-cased, for environment variables
	RustSDK    string // Options.RustSDK as a TOML string
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// New writes the tool's folder and returns the paths it wrote, relative to
// Options.Dir.
func New(o Options) ([]string, error) {
	if o.Lang == "" {
		o.Lang = "go"
	}
	if o.Cap == "" {
		o.Cap = "net"
	}
	if !contains(Langs, o.Lang) {
		return nil, fmt.Errorf("unknown language %q (one of %s)", o.Lang, strings.Join(Langs, ", "))
	}
	if !contains(Caps, o.Cap) {
		return nil, fmt.Errorf("unknown capability kind %q (one of %s)", o.Cap, strings.Join(Caps, ", "))
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(abs)
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("%q is not a tool name: lower-case letters, digits, - and _, starting with a letter", name)
	}
	if _, err := os.Lstat(abs); err == nil {
		return nil, fmt.Errorf("%s exists; mandate new writes a new folder and never overwrites one", o.Dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	d := data{
		Name: name, Ident: strings.ReplaceAll(name, "-", "_"), Lang: o.Lang, Cap: o.Cap,
		SDKModule: sdkembed.Module, SDKVersion: sdkembed.Version,
		CapName:   map[string]string{"net": "api", "data": "notes", "pay": "card"}[o.Cap],
		EnvPrefix: strings.ToUpper(strings.ReplaceAll(name, "-", "_")),
		RustSDK:   TOMLString(filepath.ToSlash(cmp.Or(o.RustSDK, DefaultRustSDK))),
	}
	files, err := render(d)
	if err != nil {
		return nil, err
	}
	// Written into a temporary sibling, then renamed: a failure leaves
	// nothing half-written.
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), "."+name+"-new-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var names []string
	for _, f := range files {
		p := filepath.Join(tmp, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, f.body, 0o644); err != nil {
			return nil, err
		}
		names = append(names, f.name)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, abs); err != nil {
		return nil, err
	}
	return names, nil
}

type file struct {
	name string
	body []byte
}

// render executes the templates that apply: common/ and the language's
// folder; a template named X.CAP.tmpl applies to capability CAP alone and
// is written as X; X.tmpl is written as X; "NAME" in a path is the tool's
// name.
func render(d data) ([]file, error) {
	var out []file
	for _, root := range []string{"templates/common", "templates/" + d.Lang} {
		err := fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel := strings.TrimPrefix(p, root+"/")
			rel, ok := strings.CutSuffix(rel, ".tmpl")
			if !ok {
				return fmt.Errorf("scaffold: %s is not a template", p)
			}
			base := path.Base(rel)
			if i := strings.LastIndex(base, "."); i > 0 && contains(Caps, base[i+1:]) {
				if base[i+1:] != d.Cap {
					return nil
				}
				rel = path.Join(path.Dir(rel), base[:i])
			}
			rel = strings.ReplaceAll(rel, "NAME", d.Name)
			src, err := templates.ReadFile(p)
			if err != nil {
				return err
			}
			t, err := template.New(p).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
			if err != nil {
				return fmt.Errorf("scaffold: %s: %w", p, err)
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, d); err != nil {
				return fmt.Errorf("scaffold: %s: %w", p, err)
			}
			out = append(out, file{rel, buf.Bytes()})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TOMLString is s as a TOML basic string ("...", with its escapes).
func TOMLString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
