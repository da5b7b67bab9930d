//go:build linux

package isolate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// The jobs of these tests, registered as an engine registers its compile.
func init() {
	Register("test-echo", func(req []byte, out *bytes.Buffer) error {
		out.Write(req)
		return nil
	})
	Register("test-fail", func(req []byte, _ *bytes.Buffer) error {
		return errors.New("the job says no: " + string(req))
	})
	Register("test-spin", func([]byte, *bytes.Buffer) error {
		for i := 0; ; i++ {
			if i < 0 {
				return nil
			}
		}
	})
	Register("test-sleep", func([]byte, *bytes.Buffer) error {
		time.Sleep(time.Hour)
		return nil
	})
	Register("test-alloc", func([]byte, *bytes.Buffer) error {
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = byte(i)
			}
			allocKept = append(allocKept, b) // kept: the memory stays in use
		}
	})
	Register("test-limits", func(_ []byte, out *bytes.Buffer) error {
		b, err := os.ReadFile("/proc/self/limits")
		out.Write(b)
		return err
	})
}

// allocKept holds what the job "test-alloc" allocates, until the child
// dies of it.
var allocKept [][]byte

func TestEcho(t *testing.T) {
	before := Started()
	res, err := Run(context.Background(), "test-echo", []byte("hello"), Limits{Memory: 64 << 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "hello" {
		t.Fatalf("output %q, want hello", res.Output)
	}
	if Started() != before+1 {
		t.Fatalf("Started went from %d to %d, want one more", before, Started())
	}
	t.Logf("a child that does nothing: %v, peak RSS %d MiB", res.Wall, res.MaxRSS>>20)
}

func TestChildBoundsItself(t *testing.T) {
	res, err := Run(context.Background(), "test-limits", nil, Limits{Memory: 64 << 20, Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Max cpu time              2                    3", "Max address space"} {
		if !strings.Contains(string(res.Output), want) {
			t.Errorf("child's limits lack %q:\n%s", want, res.Output)
		}
	}
	for line := range strings.Lines(string(res.Output)) {
		if f, ok := strings.CutPrefix(line, "Max address space"); ok && strings.Fields(f)[0] == "unlimited" {
			t.Errorf("no address-space limit: %s", line)
		}
	}
}

func TestFail(t *testing.T) {
	_, err := Run(context.Background(), "test-fail", []byte("because"), Limits{})
	if err == nil || !strings.Contains(err.Error(), "the job says no: because") {
		t.Fatalf("Run = %v, want the job's error", err)
	}
	if errors.Is(err, sandbox.ErrTimeout) || errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("Run = %v: a plain failure reported as a limit", err)
	}
}

func TestUnknownJob(t *testing.T) {
	if _, err := Run(context.Background(), "test-nothing", nil, Limits{}); err == nil {
		t.Fatal("Run of an unregistered job succeeded")
	}
}

func TestTimeout(t *testing.T) {
	for _, job := range []string{"test-spin", "test-sleep"} {
		t.Run(job, func(t *testing.T) {
			start := time.Now()
			_, err := Run(context.Background(), job, nil, Limits{Timeout: time.Second})
			if !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("Run = %v, want ErrTimeout", err)
			}
			t.Logf("%v after %v", err, time.Since(start))
		})
	}
}

func TestDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, "test-spin", nil, Limits{})
	if !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("Run = %v, want ErrTimeout", err)
	}
}

func TestMemory(t *testing.T) {
	res, err := Run(context.Background(), "test-alloc", nil, Limits{Memory: 64 << 20, Timeout: time.Minute})
	if !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("Run = %v, want ErrMemoryLimit", err)
	}
	t.Logf("%v (peak RSS %d MiB, %v)", err, res.MaxRSS>>20, res.Wall)
}

// TestCanceledChildGone: canceling ctx kills the child, and Run returns
// only once it is gone.
func TestCanceledChildGone(t *testing.T) {
	for _, job := range []string{"test-spin", "test-sleep"} {
		t.Run(job, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			pids := make(chan int, 1)
			defer OnStart(func(j string, pid int) {
				if j == job {
					pids <- pid
				}
			})()
			errc := make(chan error, 1)
			go func() {
				_, err := Run(ctx, job, nil, Limits{})
				errc <- err
			}()
			pid := <-pids
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				t.Fatalf("child %d not running: %v", pid, err)
			}
			time.Sleep(100 * time.Millisecond)
			cancel()
			select {
			case err := <-errc:
				if !errors.Is(err, sandbox.ErrCanceled) {
					t.Fatalf("Run = %v, want ErrCanceled", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return 30 s after its ctx was canceled")
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !os.IsNotExist(err) {
				t.Fatalf("child %d still there after Run returned (%v)", pid, err)
			}
		})
	}
}

func TestPackUnpack(t *testing.T) {
	h, b, err := Unpack(Pack([]byte(`{"a":1}`), []byte("body")))
	if err != nil || string(h) != `{"a":1}` || string(b) != "body" {
		t.Fatalf("Unpack = %q, %q, %v", h, b, err)
	}
	if _, _, err := Unpack([]byte{0x7f}); err == nil {
		t.Fatal("Unpack of a truncated request succeeded")
	}
}
