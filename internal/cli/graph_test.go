package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// sampleRecord has a child task, a derivation chain with a revoked cap,
// and names that need escaping in every format.
func sampleRecord() *Record {
	return &Record{
		Version: runstore.RecordVersion,
		Run: RunInfo{
			ID: "20261129T153000Z-ab12cd", Manifest: "/m/trip \"planner\".hcl",
			Started: time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC),
			Ended:   time.Date(2026, 11, 29, 15, 30, 2, 0, time.UTC),
			Exit:    1,
		},
		Graph: kernel.Graph{
			Tasks: []kernel.GraphTask{
				{ID: "t1", Principal: "alice", Module: "sha256:0123456789abcdef0123", State: kernel.TaskFailed, Denials: 2, Error: "task t1 failed:\nboom"},
				{ID: "t2", Parent: "t1", Principal: "alice", Module: "sha256:0123456789abcdef0123", State: kernel.TaskDone,
					Label: kindapi.NewLabel(nil, []string{"web:https://flights.example"})},
			},
			Caps: []kernel.GraphCap{
				{ID: "c1", Kind: "net", Name: "fli\"ghts\\\n", Holder: "t1", Scope: json.RawMessage(`{"origin":"https://flights.example","methods":["GET","POST"],"paths":[],"allow_private":false,"timeout":"30s","max_redirects":5}`), Audited: true},
				{ID: "c2", Kind: "net", Holder: "t2", Parent: "c1", Scope: json.RawMessage(`{"origin":"https://flights.example","methods":["GET"]}`), Revoked: true},
				{ID: "c3", Kind: "net", Holder: "t2", Parent: "c2", Scope: json.RawMessage(`{"origin":"https://flights.example"}`), Revoked: true, Dropped: true},
			},
		},
	}
}

func TestRenderText(t *testing.T) {
	var b bytes.Buffer
	if err := renderText(&b, sampleRecord()); err != nil {
		t.Fatal(err)
	}
	want := `run 20261129T153000Z-ab12cd: /m/trip "planner".hcl at 2026-11-29 15:30:00Z (2s), exit 1
tasks:
  t1  principal=alice  state=failed  module=sha256:0123456789ab  denials=2
    error: task t1 failed: boom
    t2  principal=alice  state=done  module=sha256:0123456789ab  label={}/{web:https://flights.example}
caps:
  c1 net "fli\"ghts\\\n" held by t1: max_redirects=5 methods=GET,POST origin=https://flights.example timeout=30s [audited]
    c2 net held by t2: methods=GET origin=https://flights.example [revoked]
      c3 net held by t2: origin=https://flights.example [dropped] [revoked]
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderTextCorruptTree(t *testing.T) {
	// Cycles and missing parents render every node once, never loop.
	r := &Record{Graph: kernel.Graph{
		Tasks: []kernel.GraphTask{{ID: "t1", Parent: "t1"}, {ID: "t2", Parent: "t9"}},
		Caps:  []kernel.GraphCap{{ID: "c1", Parent: "c2"}, {ID: "c2", Parent: "c1"}, {ID: "c3", Parent: "c3"}},
	}}
	var b bytes.Buffer
	if err := renderText(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t1", "t2", "c3"} {
		if !strings.Contains(b.String(), "  "+id+" ") {
			t.Errorf("%s missing from:\n%s", id, b.String())
		}
	}
}

func TestRenderJSONRoundTrip(t *testing.T) {
	r := sampleRecord()
	var b bytes.Buffer
	if err := renderJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "run", "tasks", "caps"} {
		if _, ok := top[k]; !ok {
			t.Errorf("no %q in %s", k, b.String())
		}
	}
	var got *Record
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// Compare through JSON: Label has no exported fields to compare.
	a, _ := json.Marshal(r)
	c, _ := json.Marshal(got)
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(c, &y)
	if !reflect.DeepEqual(x, y) {
		t.Errorf("round trip:\n got %s\nwant %s", c, a)
	}
}

// TestReadRecordFromStore: the CLI reads what the store holds, and says
// plainly when nothing was recorded.
func TestReadRecordFromStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := readRecord(ctx, dir, ""); err == nil || !strings.Contains(err.Error(), "no runs recorded yet in "+dir) {
		t.Errorf("empty dir: got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, runstore.FileName)); err == nil {
		t.Error("reading an empty state dir created a store")
	}
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := sampleRecord()
	if err := s.Finish(ctx, *r); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := readRecord(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Run.ID != r.Run.ID || len(got.Tasks) != 2 || len(got.Caps) != 3 || got.Tasks[1].Label.String() != r.Tasks[1].Label.String() {
		t.Errorf("got %+v", got)
	}
	if _, err := readRecord(ctx, dir, "r2"); err == nil || !strings.Contains(err.Error(), "no run r2 recorded in "+dir) {
		t.Errorf("missing run: %v", err)
	}
	if _, err := readRecord(ctx, dir, "../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "not a run id") {
		t.Errorf("bad id: %v", err)
	}
}

func TestStateDir(t *testing.T) {
	tests := []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"f", map[string]string{"MANDATE_STATE_DIR": "m", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "f"},
		{"", map[string]string{"MANDATE_STATE_DIR": "m", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "m"},
		{"", map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/mandate"},
		{"", map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/mandate"},
		{"", map[string]string{"HOME": "/h"}, "/h/.local/state/mandate"},
	}
	for _, tt := range tests {
		e := &env{getenv: func(k string) string { return tt.env[k] }}
		got, err := e.stateDir(tt.flag)
		if err != nil || got != filepath.FromSlash(tt.want) {
			t.Errorf("stateDir(%q) with %v = %q, %v; want %q", tt.flag, tt.env, got, err, tt.want)
		}
	}
}

func TestNewRunID(t *testing.T) {
	at := time.Date(2026, 11, 29, 15, 30, 0, 0, time.FixedZone("x", 3600))
	a, b := newRunID(at), newRunID(at)
	if !strings.HasPrefix(a, "20261129T143000Z-") || len(a) != len("20261129T143000Z-ab12cd") || !runstore.ValidRunID(a) {
		t.Errorf("got %q", a)
	}
	if a == b {
		t.Errorf("two ids are equal: %q", a)
	}
	if later := newRunID(at.Add(time.Second)); later <= a {
		t.Errorf("ids do not sort by time: %q <= %q", later, a)
	}
}
