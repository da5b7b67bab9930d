package guestbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"unicode"
)

// SectionName is the custom section that holds a module's Record.
const SectionName = "mandate.build"

// RecordVersion is the Version of the records Build writes.
const RecordVersion = 1

// The build modes a Record names.
const (
	ModeCommand   = "command"    // a WASI command: _start runs main
	ModeReactor   = "reactor"    // _initialize, then exported functions
	ModeMainEntry = "main-entry" // a Go command built as a reactor whose export "run" runs main
)

// Record is how mandate build built a module.
type Record struct {
	Version   int               `json:"version"`   // RecordVersion
	Lang      string            `json:"lang"`      // LangGo, LangRust, LangC
	Toolchain map[string]string `json:"toolchain"` // "go": "go1.26.8", "rustc": "rustc 1.63.0", "clang": "...", "wasi-libc": "..."
	SDK       RecordSDK         `json:"sdk"`
	Mode      string            `json:"mode"`  // ModeCommand, ModeReactor, ModeMainEntry
	Flags     []string          `json:"flags"` // the compiler's flags, the SDK's folder written as $SDK
	Source    RecordSource      `json:"source"`
}

// RecordSDK is the guest SDK a build used.
type RecordSDK struct {
	// Version is the SDK's version: the mandate version of the binary
	// whose embedded copy was used, or "checkout" for a checkout's
	// guest-sdk (sdk.go).
	Version string `json:"version"`
	// Digest is "sha256:<hex>" over the SDK's files, as RecordSource's
	// Digest is over the source's (TreeDigest).
	Digest string `json:"digest"`
}

// RecordSource is the source a build read from the guest's folder.
type RecordSource struct {
	// Digest is TreeDigest(Files).
	Digest string `json:"digest"`
	// Files are the files, sorted by path.
	Files []RecordFile `json:"files"`
	// VCS is the folder's revision; nil when it is in no git checkout.
	VCS *RecordVCS `json:"vcs,omitempty"`
}

// RecordFile is one file of the source.
type RecordFile struct {
	Path   string `json:"path"`   // relative to the guest's folder, slash-separated (a Go module's files above it start with "../")
	Digest string `json:"digest"` // "sha256:<hex>" of its content
}

// RecordVCS is the revision of the checkout that holds the guest's folder.
type RecordVCS struct {
	System   string `json:"system"`   // "git"
	Revision string `json:"revision"` // the commit HEAD names
}

// TreeDigest is the digest of a list of files: "sha256:" and the SHA-256 of
// the text with one line "<hex>  <path>\n" per file, in path order (what
// `sha256sum` prints for the files, named as in the list, sorted).
func TreeDigest(files []RecordFile) string {
	fs := append([]RecordFile(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s  %s\n", strings.TrimPrefix(f.Digest, "sha256:"), f.Path)
	}
	return digestOf([]byte(b.String()))
}

// maxRecord bounds a section's size: a record lists a guest's files, not
// megabytes of them.
const maxRecord = 4 << 20

// ReadRecord returns the record in wasm's mandate.build section; ok is false
// when there is none. A malformed section (bad JSON, two sections, unknown
// version, a field that is not what a build writes) is an error, as is a
// module whose sections run past its end. wasm is hostile input: ReadRecord
// only reads it.
func ReadRecord(wasm []byte) (r Record, ok bool, err error) {
	body, found, err := recordSection(wasm)
	if err != nil || !found {
		return Record{}, false, err
	}
	if len(body) > maxRecord {
		return Record{}, false, fmt.Errorf("guestbuild: the %s section is %d bytes (at most %d)", SectionName, len(body), maxRecord)
	}
	if r, err = parseRecord(body); err != nil {
		return Record{}, false, fmt.Errorf("guestbuild: the %s section: %w", SectionName, err)
	}
	return r, true, nil
}

// recordSection finds the body of wasm's one SectionName section.
func recordSection(wasm []byte) (body []byte, found bool, err error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, false, errors.New("guestbuild: not a WebAssembly module")
	}
	err = sections(wasm, func(start, end int, name string, payload []byte) error {
		if name != SectionName {
			return nil
		}
		if found {
			return fmt.Errorf("guestbuild: two %s sections", SectionName)
		}
		body, found = payload, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return body, found, nil
}

// sections calls f for each custom section of wasm (its bytes from start
// to end, its name and payload), and checks that every section's size is
// within the module.
func sections(wasm []byte, f func(start, end int, name string, payload []byte) error) error {
	for off := 8; off < len(wasm); {
		start := off
		id := wasm[off]
		off++
		size, n := binary.Uvarint(wasm[off:])
		if n <= 0 || n > 5 {
			return fmt.Errorf("guestbuild: section %d at byte %d: bad size", id, start)
		}
		off += n
		if size > uint64(len(wasm)-off) {
			return fmt.Errorf("guestbuild: section %d at byte %d: %d bytes, past the end of the module", id, start, size)
		}
		body := wasm[off : off+int(size)]
		off += int(size)
		if id != 0 {
			continue
		}
		nlen, n := binary.Uvarint(body)
		if n <= 0 || n > 5 || nlen > uint64(len(body)-n) {
			return fmt.Errorf("guestbuild: custom section at byte %d: bad name", start)
		}
		name := string(body[n : n+int(nlen)])
		if err := f(start, off, name, body[n+int(nlen):]); err != nil {
			return err
		}
	}
	return nil
}

// StripRecord returns wasm without its mandate.build sections: the module
// as the compiler wrote it, to compare two builds whose records differ
// only by what the compiler never saw (a VCS revision).
func StripRecord(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, errors.New("guestbuild: not a WebAssembly module")
	}
	out := append([]byte(nil), wasm[:8]...)
	last := 8
	err := sections(wasm, func(start, end int, name string, _ []byte) error {
		if name == SectionName {
			out = append(out, wasm[last:start]...)
			last = end
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(out, wasm[last:]...), nil
}

// appendRecord returns wasm with r's section appended (wasm must have
// none). The JSON is encoding/json's: struct fields in their order, map
// keys sorted.
func appendRecord(wasm []byte, r Record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	name := binary.AppendUvarint(nil, uint64(len(SectionName)))
	name = append(name, SectionName...)
	out := make([]byte, 0, len(wasm)+len(name)+len(body)+10)
	out = append(out, wasm...)
	out = append(out, 0)
	out = binary.AppendUvarint(out, uint64(len(name)+len(body)))
	out = append(out, name...)
	return append(out, body...), nil
}

// validate checks what a build writes: a known version, language and
// mode, digests of the form "sha256:<64 hex>", clean relative file paths
// sorted and unique, and no control characters anywhere (Diff's lines go
// to a terminal).
func (r Record) validate() error {
	if r.Version != RecordVersion {
		return fmt.Errorf("version %d (this mandate reads version %d)", r.Version, RecordVersion)
	}
	if !knownMode(r.Lang, r.Mode) {
		return fmt.Errorf("unknown language and mode %q, %q", r.Lang, r.Mode)
	}
	for k, v := range r.Toolchain {
		if !printable(k) || !printable(v) || k == "" {
			return fmt.Errorf("toolchain %q: %q: not printable", k, v)
		}
	}
	if !printable(r.SDK.Version) {
		return fmt.Errorf("sdk version %q: not printable", r.SDK.Version)
	}
	if r.SDK != (RecordSDK{}) && !isDigest(r.SDK.Digest) { // none: a Go guest that imports no SDK package
		return fmt.Errorf("sdk digest %q: not sha256:<64 hex digits>", r.SDK.Digest)
	}
	for _, f := range r.Flags {
		if !printable(f) {
			return fmt.Errorf("flag %q: not printable", f)
		}
	}
	if !isDigest(r.Source.Digest) {
		return fmt.Errorf("source digest %q: not sha256:<64 hex digits>", r.Source.Digest)
	}
	for i, f := range r.Source.Files {
		if f.Path == "" || !printable(f.Path) || !fsValidPath(f.Path) {
			return fmt.Errorf("source file %q: not a clean relative path", f.Path)
		}
		if i > 0 && r.Source.Files[i-1].Path >= f.Path {
			return fmt.Errorf("source file %q: files not sorted or repeated", f.Path)
		}
		if !isDigest(f.Digest) {
			return fmt.Errorf("source file %q: digest %q: not sha256:<64 hex digits>", f.Path, f.Digest)
		}
	}
	if v := r.Source.VCS; v != nil && (!printable(v.System) || !printable(v.Revision) || v.System == "" || v.Revision == "") {
		return fmt.Errorf("vcs %q %q: not printable", v.System, v.Revision)
	}
	return nil
}

// knownMode reports whether lang is a language Build knows and mode one
// of its modes.
func knownMode(lang, mode string) bool {
	switch lang {
	case LangGo:
		return mode == ModeCommand || mode == ModeReactor || mode == ModeMainEntry
	case LangC:
		return mode == ModeCommand || mode == ModeReactor
	case LangRust:
		return mode == ModeCommand
	}
	return false
}

// fsValidPath reports whether p names a file relative to a folder: clean,
// not absolute, and not "." or ".." alone (it may start with "../": a
// go.mod above a Go guest's folder).
func fsValidPath(p string) bool {
	rest := p
	for strings.HasPrefix(rest, "../") {
		rest = rest[3:]
	}
	return path.Clean(p) == p && !strings.HasPrefix(p, "/") && rest != "" && rest != "." && rest != ".."
}

func printable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}

func isDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Diff says, one line per difference, how other (a rebuild here) differs
// from r (the module's record): the language; each toolchain whose
// version differs, by both versions ("go: go1.26.8 in the module, go1.26.7
// here"); the SDK's version and digest; the mode and the flags; each
// source file changed, added or missing, by its path; the VCS revision.
// No lines: the records agree.
func (r Record) Diff(other Record) []string {
	var d []string
	both := func(what, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s: %s in the module, %s here", what, orNone(a), orNone(b)))
		}
	}
	if r.Version != other.Version {
		both("record version", fmt.Sprint(r.Version), fmt.Sprint(other.Version))
	}
	both("lang", r.Lang, other.Lang)
	var tools []string
	for k := range r.Toolchain {
		tools = append(tools, k)
	}
	for k := range other.Toolchain {
		if _, ok := r.Toolchain[k]; !ok {
			tools = append(tools, k)
		}
	}
	sort.Strings(tools)
	for _, k := range tools {
		both(k, r.Toolchain[k], other.Toolchain[k])
	}
	both("sdk version", r.SDK.Version, other.SDK.Version)
	both("sdk digest", r.SDK.Digest, other.SDK.Digest)
	both("mode", r.Mode, other.Mode)
	if strings.Join(r.Flags, "\x00") != strings.Join(other.Flags, "\x00") {
		d = append(d, fmt.Sprintf("flags: %q in the module, %q here", r.Flags, other.Flags))
	}
	mine := map[string]string{}
	for _, f := range r.Source.Files {
		mine[f.Path] = f.Digest
	}
	theirs := map[string]string{}
	for _, f := range other.Source.Files {
		theirs[f.Path] = f.Digest
	}
	files := 0
	for _, f := range r.Source.Files {
		switch g, ok := theirs[f.Path]; {
		case !ok:
			d = append(d, fmt.Sprintf("%s: in the module's source, missing here", f.Path))
			files++
		case g != f.Digest:
			d = append(d, fmt.Sprintf("%s: changed (%s in the module, %s here)", f.Path, f.Digest, g))
			files++
		}
	}
	for _, f := range other.Source.Files {
		if _, ok := mine[f.Path]; !ok {
			d = append(d, fmt.Sprintf("%s: added here, not in the module's source", f.Path))
			files++
		}
	}
	if files == 0 && r.Source.Digest != other.Source.Digest {
		both("source digest", r.Source.Digest, other.Source.Digest)
	}
	both("vcs", vcsString(r.Source.VCS), vcsString(other.Source.VCS))
	return d
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func vcsString(v *RecordVCS) string {
	if v == nil {
		return ""
	}
	return v.System + " " + v.Revision
}

// digestOf is "sha256:<hex>" of b.
func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Rebuild builds dir again as r says (r.Lang, r.Mode) with this machine's
// toolchains and returns the module and its record. r comes from a module
// anyone may hand over: its Flags are compared by Diff, never passed to a
// compiler (a -toolexec in a hostile record does not run); Rebuild uses
// only the builder's own fixed flags for that language and mode, and
// errors when r.Lang or r.Mode is unknown or dir holds a guest in another
// language. With an empty opt.CacheDir the build is made afresh in a
// temporary cache directory, removed after; with one, a cached module of
// the same key is returned (its record is the one a build would write).
func Rebuild(ctx context.Context, dir string, r Record, opt Options) (wasm []byte, got Record, err error) {
	if !knownMode(r.Lang, r.Mode) {
		return nil, Record{}, fmt.Errorf("guestbuild: cannot rebuild a %q guest in mode %q", r.Lang, r.Mode)
	}
	lang, err := Lang(dir)
	if err != nil {
		return nil, Record{}, err
	}
	if lang != r.Lang {
		return nil, Record{}, fmt.Errorf("guestbuild: the module was built from a %s guest; %s holds a %s guest", r.Lang, dir, lang)
	}
	opt.Reactor = r.Mode == ModeReactor
	opt.MainEntry = r.Mode == ModeMainEntry
	if opt.CacheDir == "" {
		tmp, err := os.MkdirTemp("", "mandate-rebuild-*")
		if err != nil {
			return nil, Record{}, fmt.Errorf("guestbuild: %w", err)
		}
		defer os.RemoveAll(tmp)
		opt.CacheDir = tmp
	}
	wasm, _, err = Build(ctx, dir, opt)
	if err != nil {
		return nil, Record{}, err
	}
	got, ok, err := ReadRecord(wasm)
	if err != nil {
		return nil, Record{}, err
	}
	if !ok {
		return nil, Record{}, fmt.Errorf("guestbuild: the rebuild of %s has no %s section", dir, SectionName)
	}
	return wasm, got, nil
}

// ParseRecord parses a record's JSON as ReadRecord does a section's body
// (a receipt carries a module's record this way): unknown fields, data
// after the record and anything a build does not write are errors.
func ParseRecord(body []byte) (Record, error) {
	if len(body) > maxRecord {
		return Record{}, fmt.Errorf("guestbuild: a build record of %d bytes (at most %d)", len(body), maxRecord)
	}
	r, err := parseRecord(body)
	if err != nil {
		return Record{}, fmt.Errorf("guestbuild: build record: %w", err)
	}
	return r, nil
}

// parseRecord is ParseRecord and ReadRecord's parse of a record's JSON.
func parseRecord(body []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("data after the record")
	}
	if err := r.validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// WithRecord is wasm with its records replaced by r's section, as a build
// appends it. A verifier with a module's record and a rebuild of its
// source checks with it whether the module is the rebuild's code under
// that record: the same digest means the compiler wrote the same bytes and
// the records differ only in what it never saw.
func WithRecord(wasm []byte, r Record) ([]byte, error) {
	code, err := StripRecord(wasm)
	if err != nil {
		return nil, err
	}
	return appendRecord(code, r)
}
