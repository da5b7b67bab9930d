package wazero

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/buildstamp"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Prepared modules: what a compile made of a module before wazero saw it,
// kept by the original module's digest.
//
// Before wazero compiles a module, Compile reads it whole more than once:
// its static counts (wasmbin.Static), the merge of its data segments, the
// table cap, its snapshot (read and checked), the preemption rewrite
// (wasmbin.Preempt) and the marker of the rewritten bytes. wazero's
// compilation cache is keyed by the bytes it is given, so all of that ran
// on every process's first compile of a module, cache hit or not: a third
// of a warm "mandate run". Once a module's form is settled (a command, a
// reactor with its snapshot, or one that will get none), the engine keeps
// in Config.CacheDir/mandate-prepared, under the original module's digest
// and the engine's settings:
//
//   - the module's static counts, against which each compile's limits are
//     checked as Static's would be;
//   - the rewritten bytes wazero compiles, the memory image beside them
//     (the snapshot's, or the data segments' of a module without one;
//     image.go), the initial memory, and why the module has no snapshot;
//   - the name of wazero's cache file for those bytes (the marker's).
//
// A later compile of the module parses it (its imports are checked against
// the engine's host functions every time) and hands the kept bytes to
// wazero, which still decodes and validates them (it has no way not to)
// and finds its compiled code by their SHA-256. A module whose form is not
// settled (a reactor whose first task's _initialize may still give it a
// snapshot) is not kept: the next process that compiles it settles it.
//
// A record is written by one build of the engine and read by that build
// only (buildstamp.Get: the binary's version control revision, or its
// size and time), so a changed rewrite never reads another's output. Each
// record carries a CRC-32C of its contents, checked on every read: a
// damaged record (a flipped bit; torn writes cannot happen, records are
// renamed into place) is ignored and the module prepared again. As with
// wazero's own cache files, the checksum guards against damage, not an
// attacker: whoever can write the cache directory can make the host run
// their code.

// preparedDir is the directory, under the cache directory, of prepared
// records.
const preparedDir = "mandate-prepared"

// preparedMagic starts every record; bump it when the layout or what a
// record holds changes.
const preparedMagic = "MNPREP2\n"

// preparedHeader is a record's header, before its code and image.
type preparedHeader struct {
	Stamp      string        `json:"stamp"`
	Stats      wasmbin.Stats `json:"stats"`
	MemMin     uint64        `json:"mem_min"`
	Snapshot   bool          `json:"snapshot"`
	NoSnapshot string        `json:"no_snapshot,omitempty"`
	Marker     string        `json:"marker,omitempty"`
	CodeLen    int           `json:"code_len"`
	ImageLen   int           `json:"image_len"` // the image's size; -1: no image
	// ImageRuns are the offset and length of each run of the image that
	// is not zero pages (imageData), in order: their bytes follow the
	// code, one after another.
	ImageRuns []uint64 `json:"image_runs,omitempty"`
}

// prepared is a module's record, read.
type prepared struct {
	preparedHeader
	code  []byte     // what wazero compiles
	image *imageData // the memory image tasks start from; nil: none
}

var preparedCRC = crc32.MakeTable(crc32.Castagnoli)

// preparedHit, when set (tests), is called with the digest of each module
// compiled from its record.
var preparedHit func(digest string)

// preparedPath is the record of the module of digest for e's settings,
// or "" when e keeps none.
func (e *Engine) preparedPath(digest string) string {
	if e.cacheDir == "" || e.opt.noPrepared || !sandbox.IsDigest(digest) {
		return ""
	}
	settings := fmt.Sprintf("%q preempt=%d budget=%d coalesce=%t devirt=%t snapshot=%t image=%d tables=%d snapshot-v%d plain-image",
		preparedMagic, e.opt.preempt, e.opt.budget(), !e.opt.noCoalesce, !e.opt.noDevirt, !e.opt.noSnapshot, e.opt.image, wasmbin.MaxTableElements, snapshotVersion)
	sum := sha256.Sum256([]byte(settings))
	return filepath.Join(e.cacheDir, preparedDir, hex.EncodeToString(sum[:6])+"-"+strings.TrimPrefix(digest, "sha256:"))
}

// loadPrepared returns the record of the module of digest, or nil when
// there is none this build can use.
func (e *Engine) loadPrepared(digest string) *prepared {
	path := e.preparedPath(digest)
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	p, err := decodePrepared(b)
	if err != nil {
		os.Remove(path) // damaged: prepared and written again
		return nil
	}
	if p.Stamp != buildstamp.Get() {
		return nil // another build's: overwritten by this one's
	}
	return p
}

// decodePrepared reads a record.
func decodePrepared(b []byte) (*prepared, error) {
	const fixed = len(preparedMagic) + 4 + 4
	if len(b) < fixed || string(b[:len(preparedMagic)]) != preparedMagic {
		return nil, fmt.Errorf("not a prepared record")
	}
	sum := binary.BigEndian.Uint32(b[len(preparedMagic):])
	body := b[len(preparedMagic)+4:]
	if crc32.Checksum(body, preparedCRC) != sum {
		return nil, fmt.Errorf("damaged prepared record")
	}
	n := binary.BigEndian.Uint32(body)
	body = body[4:]
	if uint64(n) > uint64(len(body)) {
		return nil, fmt.Errorf("damaged prepared record")
	}
	p := &prepared{}
	if err := json.Unmarshal(body[:n], &p.preparedHeader); err != nil {
		return nil, err
	}
	body = body[n:]
	if p.CodeLen <= 0 || p.ImageLen < -1 || p.CodeLen > len(body) {
		return nil, fmt.Errorf("damaged prepared record")
	}
	p.code, body = body[:p.CodeLen], body[p.CodeLen:]
	if p.ImageLen < 0 {
		if len(body) != 0 || len(p.ImageRuns) != 0 {
			return nil, fmt.Errorf("damaged prepared record")
		}
		return p, nil
	}
	if uint64(p.ImageLen) != p.MemMin {
		// An image is the module's initial memory (wasmbin.SplitImage);
		// its size alone says how large a memfd is made.
		return nil, fmt.Errorf("damaged prepared record: an image of %d bytes for an initial memory of %d", p.ImageLen, p.MemMin)
	}
	img, err := decodeRuns(uint64(p.ImageLen), p.ImageRuns, body)
	if err != nil {
		return nil, err
	}
	p.image = img
	return p, nil
}

// decodeRuns is the image of size bytes whose runs (offset and length
// pairs) hold body's bytes, in order; an error unless they are sorted,
// apart, within size, and take all of body.
func decodeRuns(size uint64, runs []uint64, body []byte) (*imageData, error) {
	bad := fmt.Errorf("damaged prepared record: its image")
	if len(runs)%2 != 0 {
		return nil, bad
	}
	img := &imageData{size: size}
	var end uint64
	for i := 0; i < len(runs); i += 2 {
		off, n := runs[i], runs[i+1]
		if n == 0 || off < end || off > size || n > size-off || n > uint64(len(body)) {
			return nil, bad
		}
		img.runs = append(img.runs, imageRun{off: off, b: body[:n]})
		body, end = body[n:], off+n
	}
	if len(body) != 0 {
		return nil, bad
	}
	return img, nil
}

// encodePrepared writes a record.
func encodePrepared(p *prepared) ([]byte, error) {
	p.CodeLen, p.ImageLen, p.ImageRuns = len(p.code), -1, nil
	if p.image != nil {
		p.ImageLen = int(p.image.size)
		for _, r := range p.image.runs {
			p.ImageRuns = append(p.ImageRuns, r.off, uint64(len(r.b)))
		}
	}
	hdr, err := json.Marshal(p.preparedHeader)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	imgLen := 0
	if p.image != nil {
		imgLen = p.image.bytes()
	}
	buf.Grow(len(preparedMagic) + 8 + len(hdr) + len(p.code) + imgLen)
	buf.WriteString(preparedMagic)
	buf.Write(make([]byte, 4)) // the sum, below
	buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(hdr))))
	buf.Write(hdr)
	buf.Write(p.code)
	if p.image != nil {
		for _, r := range p.image.runs {
			buf.Write(r.b)
		}
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b[len(preparedMagic):], crc32.Checksum(b[len(preparedMagic)+4:], preparedCRC))
	return b, nil
}

// storePrepared keeps p as the record of the module of digest, wasm
// (parsed as bin), with the module's static counts and the name of
// wazero's cache file for p.code. Best effort: a record not written costs
// the next process a preparation.
func (e *Engine) storePrepared(digest string, wasm []byte, bin *wasmbin.Module, p *prepared) {
	path := e.preparedPath(digest)
	if path == "" {
		return
	}
	st, err := wasmbin.Static(wasm, bin)
	if err != nil {
		return
	}
	p.Stamp, p.Stats = buildstamp.Get(), st
	if e.opt.isolated() {
		// The marker compileBounded wrote (or found) for the code.
		b, err := os.ReadFile(e.markerPath(p.code, e.opt.preempt == preemptCloseOnDone))
		if err != nil || !e.cacheFileOK(string(b)) {
			return
		}
		p.Marker = string(b)
	}
	b, err := encodePrepared(p)
	if err != nil {
		return
	}
	_ = writeFileAtomic(path, b)
}

// knownStats returns the static counts of the module of digest, when a
// record gave them to this engine.
func (e *Engine) knownStats(digest string) (wasmbin.Stats, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.stats[digest]
	return st, ok
}

// checkStatic checks the module of digest, wasm, against l: from its
// record when it has one and is not compiled in this engine yet (the
// record is returned, for compile), else as wasmbin.StaticCache does.
func (e *Engine) checkStatic(digest string, wasm []byte, l sandbox.StaticLimits) (*prepared, error) {
	e.mu.Lock()
	_, compiled := e.modules[digest]
	e.mu.Unlock()
	if compiled {
		if st, ok := e.knownStats(digest); ok {
			return nil, st.Check(l)
		}
	} else {
		if p := e.loadPrepared(digest); p != nil {
			e.mu.Lock()
			if e.stats == nil || len(e.stats) >= 4096 {
				e.stats = map[string]wasmbin.Stats{}
			}
			e.stats[digest] = p.Stats
			e.mu.Unlock()
			return p, p.Stats.Check(l)
		}
	}
	return nil, e.static.Check(digest, wasm, l)
}
