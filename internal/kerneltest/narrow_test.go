package kerneltest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// fatalTB records the first Fatalf and stops the checker there, as a real
// test's Fatalf would.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func checkNarrow(chain []kindapi.Scope, req string, allowed ...abi.Errno) (child kindapi.Scope, ok bool, fatal string) {
	tb := &fatalTB{}
	defer func() {
		if r := recover(); r != nil && r != any(tb) {
			panic(r)
		}
		fatal = tb.msg
	}()
	child, ok = kerneltest.CheckNarrow(tb, kerneltest.New(), chain, []byte(req), allowed...)
	return child, ok, ""
}

func TestCheckNarrow(t *testing.T) {
	k := kerneltest.New()
	grant := func(spec string) kindapi.Scope {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	three, one := grant(`{"level":3}`), grant(`{"level":1}`)

	if c, ok, fatal := checkNarrow([]kindapi.Scope{three}, `{"level":2}`, abi.EDENIED); !ok || fatal != "" || c.(*kerneltest.Scope).Level() != 2 {
		t.Errorf("a narrowing within the parent: %v, %v, %q", c, ok, fatal)
	}
	if _, ok, fatal := checkNarrow([]kindapi.Scope{three}, `{"level":5}`, abi.EINVAL, abi.EDENIED); ok || fatal != "" {
		t.Errorf("an allowed refusal: ok %v, fatal %q", ok, fatal)
	}
	// A refusal with an errno the kind may not use fails the check.
	if _, _, fatal := checkNarrow([]kindapi.Scope{three}, `{"level":5}`, abi.EINVAL); !strings.Contains(fatal, "errno EDENIED") {
		t.Errorf("an unexpected errno: fatal %q", fatal)
	}
	// A child within its parent but outside an older ancestor fails it.
	if _, _, fatal := checkNarrow([]kindapi.Scope{one, three}, `{}`, abi.EDENIED); !strings.Contains(fatal, "not within ancestor 0") {
		t.Errorf("a child outside an ancestor: fatal %q", fatal)
	}
}
