package constraint

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzCompileEval: a `when` expression comes from a manifest or from a
// guest's derive request, and its activation from a guest's arguments.
// Compiling and evaluating never panic; evaluation is bounded by the cost
// limit (not by the deadline), returns a bool or an error, and is
// deterministic.
func FuzzCompileEval(f *testing.F) {
	for _, s := range [][2]string{
		{`args.duration_hours <= 12 && args.stops <= 1`, `{"duration_hours": 9, "stops": 1}`},
		{`args.price <= 50.5`, `{"price": 50}`},
		{`args.recipient in ["GB29NWBK60161331926819"]`, `{"recipient": "DE00EVIL"}`},
		{`args.stops <= 1`, `{"stops": "one"}`},
		{`args.method == "POST" && args.body.amount <= 50`, `{"method":"POST","body":{"amount":50.0}}`},
		{`args.list.all(x, x > 0) && size(args.list) < 10`, `{"list":[1,2,3]}`},
		{`args.s.matches("^(a+)+$")`, `{"s":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}`},
		{`[1,2,3].map(x, [1,2,3].map(y, [1,2,3].map(z, x*y*z))).size() > 0`, `{}`},
		{`args.n / 0 == 1`, `{"n":1}`}, {`args.n + 9223372036854775807 > 0`, `{"n":1}`},
		{`has(args.a) ? args.a : false`, `{"a":true}`}, {`args`, `{}`}, {`1 + 2`, `{}`}, {`args.x <=`, `{}`},
		{`string(args.x).size() > 3`, `{"x":1e400}`}, {`args["k"] == dyn(1)`, `{"k":1}`},
	} {
		f.Add(s[0], []byte(s[1]))
	}
	c := New()
	vars := []string{"args"}
	f.Fuzz(func(t *testing.T, src string, doc []byte) {
		e, err := c.Compile(src, vars)
		if err != nil {
			return
		}
		if e.Source() != src {
			t.Fatalf("Source() = %q, want %q", e.Source(), src)
		}
		v, err := kindapi.DecodeJSONValue(doc)
		if err != nil {
			return
		}
		eval := func() (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ok, err := e.Eval(ctx, map[string]any{"args": v})
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("%s on %q: evaluation ran to the deadline; the cost limit does not bound it", src, doc)
			}
			return ok, err
		}
		ok, err := eval()
		if err != nil && ok {
			t.Fatalf("%s on %q: true with an error %v", src, doc, err)
		}
		ok2, err2 := eval()
		if ok != ok2 || (err == nil) != (err2 == nil) {
			t.Fatalf("%s on %q: %v, %v then %v, %v", src, doc, ok, err, ok2, err2)
		}
	})
}
