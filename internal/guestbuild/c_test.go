package guestbuild

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// needC skips the test when the C toolchain is missing, except on CI
// (CI=true), which installs it: there a missing toolchain fails.
func needC(t *testing.T) {
	t.Helper()
	if _, err := CToolchain(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but: %v", err)
		}
		t.Skipf("skipping C guest test: %v", err)
	}
}

// cTree makes a checkout-like tree: root/guest-sdk (the SDK module, with
// c/mandate.h from this repository plus extra), and root/guests/NAME with
// files. It returns the guest's directory and the SDK's.
func cTree(t *testing.T, files map[string]string) (dir, sdk string) {
	t.Helper()
	root := t.TempDir()
	sdk = filepath.Join(root, "guest-sdk")
	h, err := os.ReadFile("../../guest-sdk/c/mandate.h")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(root, "guests", "g")
	writeFiles(t, root, map[string]string{
		"guest-sdk/go.mod":      "module " + SDKModule + "\n\ngo 1.24\n",
		"guest-sdk/c/mandate.h": string(h),
	})
	for n, s := range files {
		writeFiles(t, dir, map[string]string{n: s})
	}
	return dir, sdk
}

const cHello = `#include "mandate.h"
int main(void) { return mandate_set_result("hi", 2) == MANDATE_ESUCCESS ? 0 : 1; }
`

// wasmExports lists a module's exports and imports ("module.name").
func wasmExports(t *testing.T, b []byte) (exports, imports []string) {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("not a wasm module: % x", b[:min(8, len(b))])
	}
	name := func(s []byte, i *int) string {
		n, k := binary.Uvarint(s[*i:])
		*i += k
		v := string(s[*i : *i+int(n)])
		*i += int(n)
		return v
	}
	for i := 8; i < len(b); {
		id := b[i]
		n, k := binary.Uvarint(b[i+1:])
		s := b[i+1+k : i+1+k+int(n)]
		i += 1 + k + int(n)
		j := 0
		switch id {
		case 2: // imports
			c, k := binary.Uvarint(s)
			j = k
			for range c {
				mod := name(s, &j)
				imports = append(imports, mod+"."+name(s, &j))
				kind := s[j]
				j++
				switch kind {
				case 0: // func: type index
					_, k := binary.Uvarint(s[j:])
					j += k
				default:
					t.Fatalf("import %s: kind %d", imports[len(imports)-1], kind)
				}
			}
		case 7: // exports
			c, k := binary.Uvarint(s)
			j = k
			for range c {
				exports = append(exports, name(s, &j))
				j++ // kind
				_, k := binary.Uvarint(s[j:])
				j += k
			}
		}
	}
	sort.Strings(exports)
	return exports, imports
}

func TestBuildCCommand(t *testing.T) {
	needC(t)
	ctx := context.Background()
	cache := t.TempDir()
	dir, sdk := cTree(t, map[string]string{"main.c": cHello, "util.h": "#define X 1\n", "-x.c": "int minus_x(void) { return 1; }\n"})
	wasm, path, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path == "" {
		t.Fatal("not cached")
	}
	exports, imports := wasmExports(t, wasm)
	if got := strings.Join(exports, " "); got != "_start memory" {
		t.Errorf("exports %q, want %q", got, "_start memory")
	}
	for _, imp := range imports {
		if !strings.HasPrefix(imp, "mandate.") && !strings.HasPrefix(imp, "wasi_snapshot_preview1.") {
			t.Errorf("import %s", imp)
		}
	}
	if !strings.Contains(strings.Join(imports, " "), "mandate.blob_create") {
		t.Errorf("imports %v: no mandate.blob_create", imports)
	}
	if bytes.Contains(wasm, []byte(".debug_info")) {
		t.Errorf("the module carries DWARF")
	}
	t.Logf("%d bytes", len(wasm))

	// Same content: the cached file. Each input changes the key.
	if _, p, err := Build(ctx, dir, Options{CacheDir: cache}); err != nil || p != path {
		t.Fatalf("rebuild: %s, %v; want cached %s", p, err, path)
	}
	for _, change := range []struct {
		what string
		do   func()
	}{
		{"a .c file", func() { writeFiles(t, dir, map[string]string{"main.c": cHello + "\n"}) }},
		{"a .h file of the guest", func() { writeFiles(t, dir, map[string]string{"util.h": "#define X 2\n"}) }},
		{"a new .c file", func() { writeFiles(t, dir, map[string]string{"more.c": "int more(void) { return 2; }\n"}) }},
		{"the SDK's header", func() {
			writeFiles(t, sdk, map[string]string{"c/mandate.h": readFile(t, filepath.Join(sdk, "c/mandate.h")) + "\n"})
		}},
		{"a new SDK file", func() { writeFiles(t, sdk, map[string]string{"c/extra/x.h": "\n"}) }},
		{"the marker (a reactor)", func() {
			writeFiles(t, dir, map[string]string{"main.c": "//mandate:reactor\n#include \"mandate.h\"\nMANDATE_ENTRY int run(void) { return 0; }\n"})
		}},
	} {
		change.do()
		_, p, err := Build(ctx, dir, Options{CacheDir: cache})
		if err != nil {
			t.Fatalf("after changing %s: %v", change.what, err)
		}
		if p == path || p == "" {
			t.Errorf("changing %s: path %q (was %q)", change.what, p, path)
		}
		path = p
	}
	// Files in subdirectories are not part of the guest.
	writeFiles(t, dir, map[string]string{"sub/broken.c": "this is not C\n"})
	if _, p, err := Build(ctx, dir, Options{CacheDir: cache}); err != nil || p != path {
		t.Errorf("a subdirectory's file: %s, %v; want %s", p, err, path)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuildCReproducible(t *testing.T) {
	needC(t)
	ctx := context.Background()
	dir1, _ := cTree(t, map[string]string{"main.c": cHello})
	dir2, _ := cTree(t, map[string]string{"main.c": cHello})
	w1, p1, err := Build(ctx, dir1, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w2, p2, err := Build(ctx, dir2, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w1, w2) {
		t.Errorf("the same guest in two places built to different modules")
	}
	if filepath.Base(p1) != filepath.Base(p2) {
		t.Errorf("keys differ across checkouts: %s, %s", p1, p2)
	}
}

func TestBuildCReactor(t *testing.T) {
	needC(t)
	ctx := context.Background()
	dir, _ := cTree(t, map[string]string{"main.c": `#include "mandate.h"
//mandate:reactor
static int ready;
__attribute__((constructor)) static void init(void) { ready = 1; }
MANDATE_ENTRY int run(void) { return ready ? 0 : 1; }
`})
	wasm, _, err := Build(ctx, dir, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	exports, _ := wasmExports(t, wasm)
	if got := strings.Join(exports, " "); got != "_initialize memory run" {
		t.Errorf("exports %q, want %q", got, "_initialize memory run")
	}

	// A reactor without run does not link; the error says why.
	dir, _ = cTree(t, map[string]string{"main.c": "//mandate:reactor\nint other(void) { return 0; }\n"})
	_, _, err = Build(ctx, dir, Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "run") {
		t.Errorf("reactor without run: %v", err)
	}

	// Options.Reactor forces it.
	dir, _ = cTree(t, map[string]string{"main.c": "#include \"mandate.h\"\nMANDATE_ENTRY int run(void) { return 0; }\n"})
	wasm, _, err = Build(ctx, dir, Options{CacheDir: t.TempDir(), Reactor: true})
	if err != nil {
		t.Fatal(err)
	}
	if exports, _ := wasmExports(t, wasm); !strings.Contains(strings.Join(exports, " "), "_initialize") {
		t.Errorf("Options.Reactor: exports %v", exports)
	}
}

func TestBuildCErrorNotCached(t *testing.T) {
	needC(t)
	cache := t.TempDir()
	dir, _ := cTree(t, map[string]string{"main.c": "int main(void) { return undefined_thing; }\n"})
	_, _, err := Build(context.Background(), dir, Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "undefined_thing") {
		t.Fatalf("error %v: want clang's stderr naming undefined_thing", err)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		t.Errorf("cache holds %s after a failed build", e.Name())
	}
}

func TestBuildCNoCompiler(t *testing.T) {
	t.Setenv("MANDATE_CC", filepath.Join(t.TempDir(), "no-such-clang"))
	dir, _ := cTree(t, map[string]string{"main.c": cHello})
	_, _, err := Build(context.Background(), dir, Options{CacheDir: t.TempDir()})
	if !errors.Is(err, ErrNoCToolchain) {
		t.Fatalf("error %v: want ErrNoCToolchain", err)
	}
	if !strings.Contains(err.Error(), "apt-get install "+CPackages) {
		t.Errorf("error %q does not name the packages", err)
	}
}

func TestLangC(t *testing.T) {
	dir, _ := cTree(t, map[string]string{"main.c": cHello})
	if l, err := Lang(dir); err != nil || l != LangC {
		t.Errorf("Lang = %q, %v; want %q", l, err, LangC)
	}
}

// helpersC exercises mandate.h's helpers (no host calls): it is compiled
// for the machine running the test, with AddressSanitizer and
// UndefinedBehaviorSanitizer, so a read past a document's end or an
// overflow fails the test. %s is the encoded HTTP response to decode.
const helpersC = `#include <stdio.h>
#include "mandate.h"

static const unsigned char resp[] = {%s};

static void show(const char *what, mandate_str *s) {
	printf("%%s: %%.*s\n", what, (int)s->len, s->ptr ? s->ptr : "");
	mandate_str_free(s);
}

int main(void) {
	mandate_str s = MANDATE_STR_INIT;
	mandate_json doc, v, e, name, value;
	mandate_http_response r;
	size_t pos, i, n;
	int depth;
	static const char *b64[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *json = " {\"records\" : [ {\"owner\":\"al\\u00e9\\\"x\\ud83d\\ude00\",\"n\":-1.5e3,\"ok\":true,\"z\":null},"
	                   "{\"owner\":\"b\",\"nested\":{\"a\":[1,[2,{\"b\":\"}\"}]]}} ], \"truncated\":false}\n";

	mandate_json_cstring(&s, "a\"\\<>&\n\t\r\x01\x1f\xc3\xa9/");
	show("string", &s);
	mandate_json_open(&s, '{');
	mandate_json_field_str(&s, "owner", "bob");
	mandate_json_field_int(&s, "min", INT64_MIN);
	mandate_json_key(&s, "fields");
	mandate_json_open(&s, '[');
	mandate_json_elem_str(&s, "ssn");
	mandate_json_elem_int(&s, 7);
	mandate_json_open(&s, '{');
	mandate_json_close(&s, '}');
	mandate_json_close(&s, ']');
	mandate_json_field_raw(&s, "raw", "[true]");
	mandate_json_close(&s, '}');
	show("object", &s);
	for (i = 0; i < sizeof b64 / sizeof b64[0]; i++) {
		mandate_base64(&s, b64[i], strlen(b64[i]));
		mandate_str_putc(&s, ' ');
	}
	show("base64", &s);
	mandate_http_request(&s, "POST", "/x?q=\"1\"", "hi", 2);
	show("request", &s);

	doc = mandate_json_view(json, strlen(json));
	if (!mandate_json_get(doc, "records", &v))
		return 1;
	for (pos = 0; mandate_json_next(v, &pos, &e);) {
		mandate_json o;
		if (mandate_json_get(e, "owner", &o))
			mandate_json_unquote(o, &s);
		mandate_str_putc(&s, '|');
		if (mandate_json_get(e, "n", &o))
			mandate_str_append(&s, o.ptr, o.len);
		mandate_str_putc(&s, '|');
		if (mandate_json_get(e, "nested", &o))
			mandate_str_append(&s, o.ptr, o.len);
		mandate_str_putc(&s, ';');
	}
	show("records", &s);
	printf("types: %%c %%c\n", mandate_json_get(doc, "truncated", &v) ? mandate_json_type(v) : '?',
	       mandate_json_get(doc, "missing", &v) ? '!' : '-');

	/* Every prefix and every one-byte corruption of the document: no
	 * crash, no read outside it (the sanitizer watches a copy of exactly
	 * that many bytes). */
	n = strlen(json);
	for (i = 0; i <= n; i++) {
		for (int k = -1; k < 4; k++) {
			static const char subst[] = "\"{[\\";
			char *c = malloc(i ? i : 1);
			memcpy(c, json, i);
			if (k >= 0 && i > 0)
				c[i / 2] = subst[k];
			doc = mandate_json_view(c, i);
			if (mandate_json_get(doc, "records", &v))
				for (pos = 0; mandate_json_next(v, &pos, &e);)
					if (mandate_json_get(e, "owner", &name))
						mandate_json_unquote(name, &s);
			mandate_str_free(&s);
			free(c);
		}
	}
	/* Nesting past the bound is refused, not recursed into. */
	{
		char *deep = malloc(2 * 10000 + 16);
		size_t l = 0;
		l += (size_t)sprintf(deep, "{\"a\":");
		for (depth = 0; depth < 10000; depth++)
			deep[l++] = '[';
		for (depth = 0; depth < 10000; depth++)
			deep[l++] = ']';
		deep[l++] = '}';
		printf("deep: %%d\n", mandate_json_get(mandate_json_view(deep, l), "a", &v));
		free(deep);
	}

	if (!mandate_http_decode(resp, sizeof resp, &r))
		return 2;
	printf("status %%u, %%u headers, body %%.*s\n", r.status, r.nheader, (int)r.body_len, (const char *)r.body);
	for (pos = 0; mandate_http_header_next(&r, &pos, &name, &value);)
		printf("header %%.*s: %%.*s\n", (int)name.len, name.ptr, (int)value.len, value.ptr);
	for (i = 0; i < sizeof resp; i++) {
		unsigned char *c = malloc(i ? i : 1);
		memcpy(c, resp, i);
		if (mandate_http_decode(c, i, &r))
			printf("prefix %%zu decoded\n", i);
		free(c);
	}
	return 0;
}
`

const helpersWant = `string: "a\"\\\u003c\u003e\u0026\n\t\r\u0001\u001fé/"
object: {"owner":"bob","min":-9223372036854775808,"fields":["ssn",7,{}],"raw":[true]}
base64:  Zg== Zm8= Zm9v Zm9vYg== Zm9vYmE= Zm9vYmFy 
request: {"method":"POST","url":"/x?q=\"1\"","body":"aGk="}
records: alé"x😀|-1.5e3|;b||{"a":[1,[2,{"b":"}"}]]};
types: f -
deep: 0
status 404, 3 headers, body not here
header Content-Type: text/plain
header X-A: 1
header X-A: 2
`

func TestCHeaderHelpers(t *testing.T) {
	needC(t)
	resp := abi.EncodeHTTPResponse(abi.HTTPResponse{Status: 404, Body: []byte("not here"),
		Header: map[string][]string{"X-A": {"1", "2"}, "Content-Type": {"text/plain"}}})
	var bs []string
	for _, c := range resp {
		bs = append(bs, strconv.Itoa(int(c)))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "helpers.c")
	if err := os.WriteFile(src, []byte(fmt.Sprintf(helpersC, strings.Join(bs, ","))), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helpers")
	cc := CCompilerPath()
	// A host build: the test needs the machine's own C library and the
	// sanitizers' runtimes, which a wasm32-only toolchain may lack.
	probe := filepath.Join(dir, "probe.c")
	os.WriteFile(probe, []byte("int main(void) { return 0; }\n"), 0o644)
	if out, err := exec.Command(cc, "-fsanitize=address,undefined", "-o", filepath.Join(dir, "probe"), probe).CombinedOutput(); err != nil {
		t.Skipf("no host C build with sanitizers here: %v\n%s", err, out)
	}
	args := []string{"-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-g", "-O1",
		"-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-I", "../../guest-sdk/c", "-o", bin, src}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	if string(out) != helpersWant {
		t.Errorf("got\n%s\nwant\n%s", out, helpersWant)
	}
}
