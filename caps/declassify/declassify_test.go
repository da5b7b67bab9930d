package declassify

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

func TestGrantNarrow(t *testing.T) {
	k := New()
	if _, err := k.Grant(kindapi.GrantContext{}, []byte(`{}`)); err == nil {
		t.Fatal("a declassifier that drops nothing was granted")
	}
	p, err := k.Grant(kindapi.GrantContext{}, []byte(`{"drop":["pii:alice","financial:alice"],"project":["fields.a","fields.b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for req, want := range map[string]error{
		`{"drop":["pii:alice"]}`:   nil,
		`{"project":["fields.a"]}`: nil,
		`{"drop":["pii:bob"]}`:     kindapi.ErrDenied,
		`{"project":["fields.c"]}`: kindapi.ErrDenied,
		`{"drop":[""]}`:            kindapi.ErrInvalid,
		`{"nonsense":1}`:           kindapi.ErrInvalid,
	} {
		_, err := k.Narrow(p, []byte(req))
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("Narrow(%s) = %v, want %v", req, err, want)
		}
	}
	whole, _ := k.Grant(kindapi.GrantContext{}, []byte(`{"drop":["pii:alice"]}`))
	if _, err := k.Narrow(whole, []byte(`{"project":["x"]}`)); err != nil {
		t.Errorf("adding a projection is narrower: %v", err)
	}
}

func TestInvoke(t *testing.T) {
	k := New()
	s, _ := k.Grant(kindapi.GrantContext{}, []byte(`{"drop":["pii:alice"],"project":["fields.nationality","missing.path"]}`))
	in := kindapi.NewBlob([]byte(`{"id":"p","fields":{"passport":"X1","nationality":"PT"}}`), kindapi.NewLabel([]string{"pii:alice", "hr"}, []string{"data:people"}))
	call := kindtest.NewCall(Op, []byte(`{"blob":7}`), s, kindapi.TaskInfo{}, nil, func(abi.Handle) (*kindapi.Blob, error) { return in, nil })
	op, err := k.Prepare(call)
	if err != nil {
		t.Fatal(err)
	}
	if op.Show == nil {
		t.Fatal("a declassification shows nothing")
	}
	if shown := op.Show(); op.Sink != nil || !strings.Contains(shown.Summary, in.Label().String()) ||
		len(shown.Details) != 2 || shown.Details[0].Value != "pii:alice" ||
		!strings.HasPrefix(shown.Details[1].Value, "31 bytes, sha256:") {
		t.Errorf("prepared declassification: sink %v, shown %+v", op.Sink, shown)
	}
	if sp := call.Spliced(); len(sp) != 1 || sp[0] != in {
		t.Errorf("Spliced() = %v, want the blob declassified (its label joins the result unless the kernel lets the kind lower it)", sp)
	}
	res, err := kerneltest.Invoke(context.Background(), k, call)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != `{"fields":{"nationality":"PT"}}` {
		t.Errorf("projection %s", res.Data)
	}
	if got := res.Label.String(); got != "{hr}/{data:people,declassified:pii:alice}" {
		t.Errorf("label %s: only pii:alice may be dropped, and the drop is recorded", got)
	}
	bad := kindtest.NewCall(Op, []byte(`{"blob":7}`), s, kindapi.TaskInfo{}, nil, func(abi.Handle) (*kindapi.Blob, error) {
		return kindapi.NewBlob([]byte("not json"), kindapi.Label{}), nil
	})
	if _, err := kerneltest.Invoke(context.Background(), k, bad); !errors.Is(err, kindapi.ErrInvalid) {
		t.Errorf("projecting a non-object: %v, want EINVAL", err)
	}
}
