package net

import (
	"errors"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Byte limits take sizes as strings too, as manifests write them.
func TestSizeStrings(t *testing.T) {
	k := New()
	s := mustGrant(t, k, `{"origin":"https://flights.example","max_response_bytes":"64KiB","max_request_bytes":"1KB"}`)
	if s.MaxResponseBytes() != 64<<10 || s.MaxRequestBytes() != 1000 {
		t.Fatalf("limits = %d, %d; want 65536, 1000", s.MaxResponseBytes(), s.MaxRequestBytes())
	}
	n, err := k.Narrow(s, []byte(`{"max_response_bytes":"32KiB"}`))
	if err != nil || n.(*Scope).MaxResponseBytes() != 32<<10 {
		t.Fatalf("narrow to 32KiB: %v", err)
	}
	if _, err := k.Narrow(s, []byte(`{"max_response_bytes":"1MiB"}`)); !errors.Is(err, kindapi.ErrDenied) {
		t.Fatalf("widen to 1MiB: got %v, want ErrDenied", err)
	}
	_, err = k.Grant(testGrantContext(t), []byte(`{"origin":"https://a.example","max_response_bytes":"12 parsecs"}`))
	var fe *kindapi.FieldError
	if !errors.As(err, &fe) || fe.Field != "max_response_bytes" {
		t.Fatalf("bad size: got %v, want a FieldError on max_response_bytes", err)
	}
}
