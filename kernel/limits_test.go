package kernel_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

// TestRateLimit runs the limits guest against a capability granted 5 calls
// an hour: its 3 calls pass, and of the 3 made through a capability it
// derived, 2 pass and the last is ELIMIT — deriving gives no new allowance.
func TestRateLimit(t *testing.T) {
	e := newEnv(t)
	spec := e.spec(t, "limits", kernel.Limits{}, "rate 3")
	spec.Grants[0].Rate = kernel.Rate{N: 5, Per: time.Hour}
	task, err := e.k.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("run: %v (last error %q)", err, task.LastError())
	}
	got := guestResult(t, task)
	want := map[string][]int{"root": {0, 0, 0}, "derived": {0, 0, int(abi.ELIMIT)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errnos: got %v, want %v", got, want)
	}
	if n := e.kind.Calls.Load(); n != 5 {
		t.Errorf("the kind saw %d calls, want 5", n)
	}
	g := e.k.Graph()
	if g.Tasks[0].Denials != 1 {
		t.Errorf("denials: got %d, want 1", g.Tasks[0].Denials)
	}
	if g.Caps[0].Rate != "5/h" || g.Caps[1].Rate != "" {
		t.Errorf("graph rates: %q, %q; want \"5/h\" on the grant only", g.Caps[0].Rate, g.Caps[1].Rate)
	}
}

// TestBlobBytesLimit has the limits guest hoard 1000-byte blobs under a
// 10 KiB limit: creation fails with ELIMIT once the bytes held would pass
// it, and dropping one makes room again.
func TestBlobBytesLimit(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "limits", kernel.Limits{MaxBlobBytes: 10 << 10}, "blobs 1000 12"))
	if err != nil {
		t.Fatalf("run: %v (last error %q)", err, task.LastError())
	}
	got := guestResult(t, task)
	create := got["create"]
	ok := 0
	for _, errno := range create {
		if errno == 0 {
			ok++
		} else if errno != int(abi.ELIMIT) {
			t.Fatalf("create errnos %v: want only 0 and ELIMIT", create)
		}
	}
	// 10 KiB holds the input (13 bytes) and 10 blobs of 1000 bytes.
	if ok != 10 || len(create) != 12 || create[10] == 0 {
		t.Errorf("create errnos: %v, want 10 successes then ELIMIT", create)
	}
	if !reflect.DeepEqual(got["after_drop"], []int{0}) {
		t.Errorf("after a drop: %v, want success", got["after_drop"])
	}
}

// TestInputOverBlobLimit: an input the task could never hold is refused
// when the task is made.
func TestInputOverBlobLimit(t *testing.T) {
	e := newEnv(t)
	_, err := e.k.Run(context.Background(), e.spec(t, "limits", kernel.Limits{MaxBlobBytes: 4}, "rate 1"))
	if err == nil || !strings.Contains(err.Error(), "input of 6 bytes exceeds the task's blob limit of 4") {
		t.Fatalf("a task whose input exceeds its blob limit: %v", err)
	}
}

func guestResult(t *testing.T, task *kernel.Task) map[string][]int {
	t.Helper()
	res, ok := task.Result()
	if !ok {
		t.Fatal("no result")
	}
	var got map[string][]int
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatalf("result %q: %v", res, err)
	}
	return got
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]kernel.Rate{
		"10/s": {10, time.Second}, "100 / min": {100, time.Minute}, "1/h": {1, time.Hour},
		"3/500ms": {3, 500 * time.Millisecond}, "7/10m": {7, 10 * time.Minute},
	} {
		got, err := kernel.ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := kernel.ParseRate(got.String()); err != nil || back != got {
			t.Errorf("ParseRate(%q.String() = %q) = %v, %v", in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "10", "0/s", "-1/s", "x/s", "10/fortnight", "10/1ns", "10/48h", "99999999999/s"} {
		if _, err := kernel.ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) succeeded", bad)
		}
	}
}
