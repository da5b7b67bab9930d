package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// A module file's digest, not computed again while the file is unchanged.
//
// A run reads its module file and checks its SHA-256 against the
// manifest's pin, and the engine finds the module's compiled code by it: a
// pass over every byte of a module of megabytes on every run. As git's
// index does for a working tree, the digest of a .wasm file is kept with
// the file's identity and times (device, inode, size, modification and
// change time, in nanoseconds) in one small record in the host's cache
// directory (CacheDir/digests), and used while the file, as stat sees it
// when it is opened and after it is read, is exactly that. Any change of
// the file changes one of them: new bytes written in place change its
// change time (ctime, which no user can set back, unlike its modification
// time: "touch -d" and os.Chtimes set ctime to now), and a file replaced by
// another (a rename over it) has another inode. A file changed so recently
// that a change within the same tick of the file system's clock could go
// unseen (git's "racily clean" entries) is not recorded: it is hashed
// again on its next read. A record that is damaged, or names another file,
// is ignored and the file hashed again.
//
// The record is trusted as the compiled-code cache beside it is: whoever
// can write the cache directory can make the host run their code, so it
// must be as private as the mandate binary itself.

// digestRecordMagic starts every record; bump its version when the layout
// changes.
const digestRecordMagic = "mandate-digest-1"

// racyWindow is how long after a file's last change its digest is not
// recorded: longer than any file system's timestamp granularity (ext4 and
// tmpfs take the kernel's coarse clock, a few milliseconds; some file
// systems keep seconds). A variable for tests.
var racyWindow = 2 * time.Second

// fileStamp is what identifies a file's contents without reading them.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns since the epoch
}

func (s fileStamp) String() string {
	return fmt.Sprintf("%d %d %d %d %d", s.dev, s.ino, s.size, s.mtime, s.ctime)
}

// readModuleFile reads the module file at path and returns its bytes and
// digest (sandbox.Digest), taking the digest from cacheDir's record of the
// file when the file is unchanged since, and recording it otherwise.
func readModuleFile(path, cacheDir string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	before, stamped := statFile(f)
	wasm, err := readAll(f, before.size)
	if err != nil {
		return nil, "", err
	}
	if !stamped || cacheDir == "" {
		return wasm, sandbox.Digest(wasm), nil
	}
	after, ok := statFile(f)
	if !ok || after != before || int64(len(wasm)) != before.size {
		// Changed while it was read: what was read has no stamp.
		return wasm, sandbox.Digest(wasm), nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return wasm, sandbox.Digest(wasm), nil
	}
	rec := digestRecordPath(cacheDir, abs)
	if d, ok := readDigestRecord(rec, abs, before); ok {
		return wasm, d, nil
	}
	d := sandbox.Digest(wasm)
	if time.Since(time.Unix(0, max(before.mtime, before.ctime))) >= racyWindow {
		writeDigestRecord(rec, abs, before, d)
	}
	return wasm, d, nil
}

// readAll reads f, of size bytes as stat said, to its end.
func readAll(f *os.File, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(f)
	}
	// One more byte than stat said, so that a file grown since is read
	// whole (and then not stamped: its length is not the stamp's).
	b := make([]byte, 0, size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// digestRecordPath is the record of the file at abs.
func digestRecordPath(cacheDir, abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(cacheDir, "digests", hex.EncodeToString(sum[:16]))
}

// digestRecordLine is a record's text without its checksum.
func digestRecordLine(abs string, st fileStamp, digest string) string {
	return digestRecordMagic + " " + st.String() + " " + digest + " " + strconv.Quote(abs)
}

// readDigestRecord returns the digest the record at rec holds for the file
// at abs with stamp st, if it holds one.
func readDigestRecord(rec, abs string, st fileStamp) (string, bool) {
	b, err := os.ReadFile(rec)
	if err != nil || len(b) > 4096 {
		return "", false
	}
	line, sum, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\t")
	if !ok || sum != strconv.FormatUint(uint64(crc32.Checksum([]byte(line), crcTable)), 16) {
		return "", false
	}
	f := strings.SplitN(line, " ", 8)
	if len(f) != 8 || f[0] != digestRecordMagic {
		return "", false
	}
	d := f[6]
	if !sandbox.IsDigest(d) || line != digestRecordLine(abs, st, d) {
		return "", false
	}
	return d, true
}

// writeDigestRecord records digest for the file at abs with stamp st, best
// effort: a record not written costs a hash later.
func writeDigestRecord(rec, abs string, st fileStamp, digest string) {
	line := digestRecordLine(abs, st, digest)
	data := line + "\t" + strconv.FormatUint(uint64(crc32.Checksum([]byte(line), crcTable)), 16) + "\n"
	dir := filepath.Dir(rec)
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), rec)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)
