package data

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// This file attacks the data capability end to end: the hostile guest
// testdata/guests/data-hostile runs under the kernel (wazero) as
// principal alice with her own benefits slice and tries to reach Bob's
// record, fields outside the slice, others' records through queries,
// writes outside the slice, widening derivations and invented handles.
// The test checks each errno, what the guest saw, and that the store is
// byte-for-byte unchanged.

var hostileWant = map[string]string{
	"own_by_owner":              "ESUCCESS",
	"own_by_id":                 "ESUCCESS",
	"bob_by_id":                 "EDENIED",
	"bob_by_owner":              "EDENIED",
	"nobody_by_id":              "EDENIED",
	"nobody_by_owner":           "EDENIED",
	"field_outside":             "EDENIED",
	"field_outside_mixed":       "EDENIED",
	"where_outside":             "EDENIED",
	"query_fields_outside":      "EDENIED",
	"query_match_others":        "ESUCCESS",
	"query_all":                 "ESUCCESS",
	"query_huge_limit":          "EINVAL",
	"write_outside_fields":      "EDENIED",
	"write_mixed_fields":        "EDENIED",
	"write_bob":                 "EDENIED",
	"write_new_record":          "EDENIED",
	"write_new_field":           "EDENIED",
	"derive_widen_fields":       "EDENIED",
	"derive_star_fields":        "EDENIED",
	"derive_other_collection":   "EDENIED",
	"derive_relation":           "EDENIED",
	"derive_read_only":          "ESUCCESS",
	"derive_widen_ops":          "EDENIED",
	"derive_widen_fields_child": "EDENIED",
	"read_only_write":           "EDENIED",
	"read_only_dental":          "EDENIED",
	"derive_owners_bob":         "ESUCCESS", // a subset: own AND owners [bob]
	"owners_bob_read":           "EDENIED",
	"owners_bob_query":          "ESUCCESS", // and empty
	"derive_ids_bob":            "ESUCCESS",
	"ids_bob_read":              "EDENIED",
	"ids_alice_read":            "ESUCCESS",
	"invented_handle":           "EBADHANDLE",
	"invented_generation":       "EBADHANDLE",
	"describe":                  "ESUCCESS",
}

func TestGuestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	ctx := context.Background()
	st := openTemp(t)
	seed(t, st)
	before := dump(t, st)

	wasm, _, err := guestbuild.Build(ctx, filepath.Join("..", "..", "testdata", "guests", "data-hostile"), guestbuild.Options{})
	if err != nil {
		t.Fatalf("building data-hostile: %v", err)
	}
	logs := &kerneltest.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	eng := testengine.New(t)
	kind := New(st)
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := k.Grant("data", kindapi.GrantContext{}, []byte(`{"collection":"benefits","records":"own","fields":["plan","dental"],"ops":["read","query","write"]}`))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := eng.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	task, err := k.Run(ctx, kernel.TaskSpec{
		Module: mod, Principal: "alice",
		Grants: []kernel.GrantSpec{{Name: "benefits", Kind: "data", Scope: scope}},
		Limits: kernel.Limits{Timeout: time.Minute},
	})
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, task.Stderr().String())
	}
	raw, ok := task.Result()
	if !ok {
		t.Fatalf("no result; stderr: %s\nlogs: %s", task.Stderr().String(), logs.String())
	}
	var got map[string]struct{ Errno, Body string }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	for key, want := range hostileWant {
		if g, ok := got[key]; !ok {
			t.Errorf("%s: no result", key)
		} else if g.Errno != want {
			t.Errorf("%s: %s, want %s (body %s)", key, g.Errno, want, g.Body)
		}
	}
	for key := range got {
		if _, ok := hostileWant[key]; !ok {
			t.Errorf("%s: unexpected result %+v", key, got[key])
		}
	}

	// What the guest read: only Alice's record, only plan and dental.
	for _, key := range []string{"own_by_owner", "own_by_id", "ids_alice_read"} {
		if b := got[key].Body; b != `{"id":"b-alice","owner":"alice","fields":{"dental":true,"plan":"gold"}}` {
			t.Errorf("%s: %s", key, b)
		}
	}
	for _, key := range []string{"query_match_others", "query_all"} {
		if b := got[key].Body; b != `{"records":[{"id":"b-alice","owner":"alice","fields":{"dental":true,"plan":"gold"}}],"truncated":false}` {
			t.Errorf("%s: %s", key, b)
		}
	}
	if b := got["owners_bob_query"].Body; b != `{"records":[],"truncated":false}` {
		t.Errorf("owners_bob_query: %s", b)
	}
	// The same error for Bob's record and one that does not exist.
	stdout := task.Stdout().String()
	for _, secret := range []string{"B456", "A123", "silver", "platinum", "D789", `"salary"`, "b-dave", "b-carol"} {
		if strings.Contains(stdout, secret) || strings.Contains(string(raw), secret) {
			t.Errorf("the guest saw %q:\n%s", secret, stdout)
		}
	}
	if !strings.Contains(stdout, `bob_by_id: EDENIED  call:read: data: record "b-bob" is not in this capability's records (or does not exist)`) ||
		!strings.Contains(stdout, `nobody_by_id: EDENIED  call:read: data: record "b-nobody" is not in this capability's records (or does not exist)`) {
		t.Errorf("existence must not leak through the error text:\n%s", stdout)
	}

	// Nothing changed.
	if after := dump(t, st); after != before {
		t.Errorf("the store changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	// Reading raised the task's label to Alice's PII? No: plan and dental
	// are unlabelled; only the integrity taint is there.
	if l := task.Label(); len(l.Conf()) != 0 || !strings.Contains(l.String(), "data:benefits") {
		t.Errorf("task label %v", l)
	}
	if t.Failed() {
		t.Logf("guest stdout:\n%s", stdout)
	}
}
