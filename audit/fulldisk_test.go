//go:build linux

package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFullDiskCheckHead: on a filesystem with no space left, opening the
// log and checking its head (what a run does before it starts) is an
// error, not a pass and not a panic: for a log that was open when the
// disk filled, for one opened then while another connection has it open
// (its -wal and -shm files exist, so opening needs no space), and for
// one opened with nothing else open. Appending fails too. Once space is
// freed the log verifies with exactly the entries it had, and takes new
// ones.
func TestFullDiskCheckHead(t *testing.T) {
	ctx := context.Background()
	mnt := smallFS(t, "1m")
	path := filepath.Join(mnt, "state", "audit.db")
	const n = 10
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a := l.ForRun("r1")
	for i := range n {
		if err := a.Record(ctx, event(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	before, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	openAndCheck := func(t *testing.T) {
		l, err := Open(path)
		if err == nil {
			defer l.Close()
			err = l.CheckHead(ctx)
		}
		t.Logf("Open, CheckHead: %v", err)
		if err == nil {
			t.Fatal("a log on a full disk opened and passed CheckHead")
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("the error does not name %s", path)
		}
	}

	filler := fillDisk(t, mnt)
	t.Run("open when the disk filled", func(t *testing.T) {
		err := before.CheckHead(ctx)
		t.Logf("CheckHead: %v", err)
		if err == nil {
			t.Error("CheckHead passed on a full disk")
		}
		err = before.ForRun("r2").Record(ctx, event(n))
		t.Logf("Record: %v", err)
		if err == nil {
			t.Error("an entry was recorded on a full disk")
		}
	})
	t.Run("opened while open elsewhere", openAndCheck)
	// Closing the last connection removed the -shm file: fill its space.
	before.Close()
	fillDisk(t, mnt)
	t.Run("opened with nothing else open", openAndCheck)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path)
	if err != nil {
		t.Fatalf("the log does not open once space is freed: %v", err)
	}
	defer l.Close()
	rep, err := l.Verify(ctx)
	if err != nil {
		t.Fatalf("the log does not verify once space is freed: %v", err)
	}
	if rep.Entries != n || rep.TreeSize != n {
		t.Errorf("%d entries, tree size %d; want the %d from before the disk filled", rep.Entries, rep.TreeSize, n)
	}
	if err := l.CheckHead(ctx); err != nil {
		t.Errorf("CheckHead once space is freed: %v", err)
	}
	if err := l.ForRun("r2").Record(ctx, event(n)); err != nil {
		t.Fatalf("recording once space is freed: %v", err)
	}
	if rep, err := l.Verify(ctx); err != nil || rep.Entries != n+1 {
		t.Fatalf("after a new entry: %+v, %v", rep, err)
	}
}

// TestFullDiskLittleLeft: with a little space left, from none to more
// than a few pages, each step of a run's use of the log (Open, CheckHead,
// Record, Checkpoint) either fails or is done, and once space is freed
// the log verifies with every entry whose Record succeeded and no other.
func TestFullDiskLittleLeft(t *testing.T) {
	ctx := context.Background()
	for left := int64(0); left <= 96<<10; left += 8 << 10 {
		mnt := smallFS(t, "1m")
		path := filepath.Join(mnt, "state", "audit.db")
		l, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		const n = 5
		for i := range n {
			if err := l.ForRun("r1").Record(ctx, event(i)); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		filler := fillDisk(t, mnt)
		if err := os.Truncate(filler, max(fileSize(t, filler)-left, 0)); err != nil {
			t.Fatal(err)
		}
		want := int64(n)
		var failed string
		if l, err = Open(path); err != nil {
			failed = "Open: " + err.Error()
		} else if err = l.CheckHead(ctx); err != nil {
			failed = "CheckHead: " + err.Error()
		} else {
			for i := 0; i < 20; i++ {
				if err = l.ForRun("r2").Record(ctx, event(i)); err != nil {
					failed = "Record: " + err.Error()
					break
				}
				want++
			}
			if failed == "" {
				if _, err := l.Checkpoint(); err != nil {
					failed = "Checkpoint: " + err.Error()
				}
			}
		}
		if l != nil {
			l.Close()
		}
		t.Logf("%d KiB left: %d entries recorded, then %s", left>>10, want-n, failed)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		l, err = Open(path)
		if err != nil {
			t.Fatalf("%d KiB left: the log does not open once space is freed: %v", left>>10, err)
		}
		rep, err := l.Verify(ctx)
		l.Close()
		if err != nil {
			t.Fatalf("%d KiB left: the log does not verify once space is freed: %v", left>>10, err)
		}
		if rep.Entries != want || rep.TreeSize != want {
			t.Fatalf("%d KiB left: %d entries, tree size %d; %d were recorded", left>>10, rep.Entries, rep.TreeSize, want)
		}
	}
}

// smallFS mounts a tmpfs of size (a mount option, "1m") on a temporary
// directory until the test ends, or skips the test where mounting is not
// permitted.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		t.Skipf("cannot mount a %s tmpfs to fill (%v): the full-disk case needs a small filesystem, "+
			"and the audit log has no hook to make its writes fail instead", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the tmpfs at %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes to dir/filler until the filesystem has no space left,
// and returns its path. Called again, it fills what was freed since.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for _, n := range []int{len(chunk), 1} { // the last bytes of the last block too
		for err == nil {
			_, err = f.Write(chunk[:n])
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
		}
		err = nil
	}
	return path
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
