package wazero

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// hits counts the modules compiled from their prepared records.
func hits(t *testing.T) func() []string {
	var mu sync.Mutex
	var got []string
	preparedHit = func(d string) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}
	t.Cleanup(func() { preparedHit = nil })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// runHello runs the hello command and checks what it wrote.
func runHello(t *testing.T, mod sandbox.Module) {
	t.Helper()
	var out bytes.Buffer
	if err := mod.Run(context.Background(), sandbox.RunConfig{Name: "hello", Stdout: &out, MemoryLimit: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "hello") {
		t.Fatalf("stdout %q", out.String())
	}
}

// TestPreparedRecord: a command compiled once is compiled by the next
// engine on the cache directory from its record (no rewrite), runs as it
// did, and has its static limits checked from the record; a damaged
// record is not used, and is written again.
func TestPreparedRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := sandboxtest.Guest("hello")
	digest := sandbox.Digest(wasm)
	hit := hits(t)

	e1, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod, err := e1.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	runHello(t, mod)
	if n := len(hit()); n != 0 {
		t.Fatalf("%d hits on a new cache directory", n)
	}
	path := e1.preparedPath(digest)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no record: %v", err)
	}

	e2, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	// Static limits, from the record.
	if _, err := e2.CompileWith(ctx, wasm, sandbox.CompileConfig{Limits: sandbox.StaticLimits{Functions: 1}}); !errors.Is(err, sandbox.ErrStaticLimit) {
		t.Fatalf("a limit of one function: %v, want ErrStaticLimit", err)
	}
	mod2, err := e2.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	runHello(t, mod2)
	if got := hit(); len(got) != 1 || got[0] != digest {
		t.Fatalf("hits %v, want the module's one", got)
	}
	if mod2.Kind() != sandbox.Command {
		t.Errorf("kind %v from the record", mod2.Kind())
	}

	// A flipped bit in the code: not used, prepared again, written again.
	bad := bytes.Clone(good)
	bad[len(bad)-100] ^= 1
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	e3, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod3, err := e3.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	runHello(t, mod3)
	if n := len(hit()); n != 1 {
		t.Fatalf("a damaged record was used (%d hits)", n)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("the record was not written again (%v)", err)
	}

	// Another engine setting has a record of its own.
	e4, err := newEngine(ctx, sandbox.Config{CacheDir: dir}, options{preemptBudget: 77})
	if err != nil {
		t.Fatal(err)
	}
	defer e4.Close(ctx)
	if e4.preparedPath(digest) == path {
		t.Fatal("another preemption budget has the same record")
	}
}

// TestPreparedSnapshot: a reactor's record is written once its snapshot
// is settled, and an engine compiling from it starts from the snapshot.
func TestPreparedSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := sandboxtest.Guest("reactor")
	hit := hits(t)

	e1, h1 := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod, err := e1.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := mod.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if used, why := sandboxtest.Settled(t, mod); !used {
		t.Fatalf("no snapshot: %s", why)
	}
	if _, err := os.Stat(e1.preparedPath(sandbox.Digest(wasm))); !os.IsNotExist(err) {
		t.Fatalf("a record of a form not settled when compiled: %v", err)
	}
	// The next engine compiles from the snapshot, settled: the record.
	e2, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	if _, err := e2.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e2.preparedPath(sandbox.Digest(wasm))); err != nil {
		t.Fatalf("no record of the settled form: %v", err)
	}
	e3, h3 := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod3, err := e3.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(hit()); n != 1 {
		t.Fatalf("%d hits, want 1", n)
	}
	if used, why := mod3.(*Module).Snapshot(); !used {
		t.Fatalf("the record's form is not the snapshot: %s", why)
	}
	for i := range 2 {
		if err := mod3.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
			t.Fatalf("run %d from the record: %v", i, err)
		}
	}
	if n, n1 := len(h3.Calls()), len(h1.Calls()); n != 2 || n1 != 1 {
		t.Errorf("host calls %d (want 2: one per run, none from init), first engine %d", n, n1)
	}
}

// TestSparseImage: an image keeps its pages that are not all zero as runs,
// and gives back exactly the bytes it was made from.
func TestSparseImage(t *testing.T) {
	const page = imagePage
	b := make([]byte, 10*page+100) // a partial last page
	b[0] = 1                       // page 0
	b[page+page-1] = 2             // page 1, its last byte: one run with page 0
	b[4*page+7] = 3                // page 4 alone
	b[7*page] = 4                  // pages 7 and 8
	b[8*page+1] = 5
	b[10*page+99] = 6 // the partial page
	img := sparseImage(b)
	want := []struct{ off, n int }{{0, 2 * page}, {4 * page, page}, {7 * page, 2 * page}, {10 * page, 100}}
	if len(img.runs) != len(want) {
		t.Fatalf("%d runs, want %d", len(img.runs), len(want))
	}
	for i, w := range want {
		if r := img.runs[i]; r.off != uint64(w.off) || len(r.b) != w.n {
			t.Errorf("run %d at %d, %d bytes; want at %d, %d bytes", i, r.off, len(r.b), w.off, w.n)
		}
	}
	if img.size != uint64(len(b)) || img.bytes() != 5*page+100 {
		t.Errorf("size %d, %d bytes in runs", img.size, img.bytes())
	}
	got := make([]byte, len(b))
	img.copyTo(got)
	if !bytes.Equal(got, b) {
		t.Fatal("copyTo does not give the image back")
	}
	if runs := sparseImage(make([]byte, 3*page)).runs; len(runs) != 0 {
		t.Fatalf("an image of zeros has %d runs", len(runs))
	}
}

// TestPreparedImageRuns: a record's image comes back as it was written,
// and a record whose runs are not sorted, apart, within the image and
// exactly its bytes is refused as damaged.
func TestPreparedImageRuns(t *testing.T) {
	const page = imagePage
	b := make([]byte, 6*page)
	b[10], b[3*page+5], b[6*page-1] = 1, 2, 3
	p := &prepared{code: []byte("code"), image: sparseImage(b)}
	p.MemMin = uint64(len(b))
	enc, err := encodePrepared(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) > len(b) {
		t.Fatalf("a record of %d bytes for an image of %d, 3 pages of it not zero", len(enc), len(b))
	}
	dec, err := decodePrepared(enc)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, dec.image.size)
	dec.image.copyTo(got)
	if !bytes.Equal(got, b) || string(dec.code) != "code" {
		t.Fatal("the record's image or code differs from what was written")
	}
	if dec, err := decodePrepared(mustEncode(t, &prepared{code: []byte("code")})); err != nil || dec.image != nil {
		t.Fatalf("a record without an image: %v, image %v", err, dec.image)
	}

	// record writes a header and body with a good sum.
	record := func(h preparedHeader, body string) []byte {
		hdr, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		rest := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
		rest = append(append(rest, hdr...), body...)
		out := binary.BigEndian.AppendUint32([]byte(preparedMagic), crc32.Checksum(rest, preparedCRC))
		return append(out, rest...)
	}
	good := preparedHeader{MemMin: 2 * page, CodeLen: 4, ImageLen: 2 * page, ImageRuns: []uint64{0, 2, page, 3}}
	if _, err := decodePrepared(record(good, "codeaabbb")); err != nil {
		t.Fatalf("a well-formed record: %v", err)
	}
	// The image is the module's initial memory, no larger nor smaller:
	// its size bounds the memfd made of it, whatever the runs hold.
	for _, memMin := range []uint64{page, 4 * page} {
		h := good
		h.MemMin = memMin
		if _, err := decodePrepared(record(h, "codeaabbb")); err == nil {
			t.Errorf("an image of %d bytes for an initial memory of %d was decoded", good.ImageLen, memMin)
		}
	}
	for _, c := range []struct {
		name string
		size int
		runs []uint64
		body string
	}{
		{"odd", 2 * page, []uint64{0, 2, page}, "codeaabbb"},
		{"overlap", 2 * page, []uint64{0, 2, 1, 3}, "codeaabbb"},
		{"unsorted", 2 * page, []uint64{page, 3, 0, 2}, "codebbbaa"},
		{"past the image", 2 * page, []uint64{0, 2, 2*page - 1, 3}, "codeaabbb"},
		{"empty run", 2 * page, []uint64{0, 0, page, 3}, "codebbb"},
		{"bytes left over", 2 * page, []uint64{0, 2, page, 3}, "codeaabbbc"},
		{"bytes missing", 2 * page, []uint64{0, 2, page, 3}, "codeaabb"},
		{"runs without an image", -1, []uint64{0, 2}, "codeaa"},
		{"bytes without an image", -1, nil, "codeaa"},
	} {
		h := preparedHeader{MemMin: uint64(max(c.size, 0)), CodeLen: 4, ImageLen: c.size, ImageRuns: c.runs}
		if _, err := decodePrepared(record(h, c.body)); err == nil {
			t.Errorf("%s: a damaged record was decoded", c.name)
		}
	}
}

func mustEncode(t *testing.T, p *prepared) []byte {
	t.Helper()
	b, err := encodePrepared(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
