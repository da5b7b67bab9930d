package declassify

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
)

func TestGrantNarrow(t *testing.T) {
	k := New()
	if _, err := k.Grant(kernel.GrantContext{}, []byte(`{}`)); err == nil {
		t.Fatal("a declassifier that drops nothing was granted")
	}
	p, err := k.Grant(kernel.GrantContext{}, []byte(`{"drop":["pii:alice","financial:alice"],"project":["fields.a","fields.b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for req, want := range map[string]error{
		`{"drop":["pii:alice"]}`:   nil,
		`{"project":["fields.a"]}`: nil,
		`{"drop":["pii:bob"]}`:     kernel.ErrDenied,
		`{"project":["fields.c"]}`: kernel.ErrDenied,
		`{"drop":[""]}`:            kernel.ErrInvalid,
		`{"nonsense":1}`:           kernel.ErrInvalid,
	} {
		_, err := k.Narrow(p, []byte(req))
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("Narrow(%s) = %v, want %v", req, err, want)
		}
	}
	whole, _ := k.Grant(kernel.GrantContext{}, []byte(`{"drop":["pii:alice"]}`))
	if _, err := k.Narrow(whole, []byte(`{"project":["x"]}`)); err != nil {
		t.Errorf("adding a projection is narrower: %v", err)
	}
}

func TestInvoke(t *testing.T) {
	k := New()
	s, _ := k.Grant(kernel.GrantContext{}, []byte(`{"drop":["pii:alice"],"project":["fields.nationality","missing.path"]}`))
	in := kernel.NewBlob([]byte(`{"id":"p","fields":{"passport":"X1","nationality":"PT"}}`), kernel.NewLabel([]string{"pii:alice", "hr"}, []string{"data:people"}))
	call := kernel.NewCall(Op, []byte(`{"blob":7}`), s, kernel.TaskInfo{}, nil, func(abi.Handle) (*kernel.Blob, error) { return in, nil })
	op, err := k.Prepare(call)
	if err != nil {
		t.Fatal(err)
	}
	if op.Show == nil {
		t.Fatal("a declassification shows nothing")
	}
	if shown := op.Show(); op.Sink != nil || !strings.Contains(shown.Summary, in.Label().String()) ||
		len(shown.Details) != 1 || shown.Details[0].Value != "pii:alice" {
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
	bad := kernel.NewCall(Op, []byte(`{"blob":7}`), s, kernel.TaskInfo{}, nil, func(abi.Handle) (*kernel.Blob, error) {
		return kernel.NewBlob([]byte("not json"), kernel.Label{}), nil
	})
	if _, err := kerneltest.Invoke(context.Background(), k, bad); !errors.Is(err, kernel.ErrInvalid) {
		t.Errorf("projecting a non-object: %v, want EINVAL", err)
	}
}
