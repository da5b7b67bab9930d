package constraint

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzSum: sum of a list of ints is their exact total or an overflow
// error, of a list of doubles the total Go computes in the same order;
// the member form agrees; nothing panics.
func FuzzSum(f *testing.F) {
	for _, s := range [][]byte{
		nil, {1, 0, 0, 0, 0, 0, 0, 0},
		binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.MaxInt64), 1),
		binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1<<63), 1<<63),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Inf(1))),
	} {
		f.Add(s)
	}
	env, err := cel.NewEnv(append(historyOptions(),
		cel.Variable("ints", cel.ListType(cel.IntType)), cel.Variable("doubles", cel.ListType(cel.DoubleType)))...)
	if err != nil {
		f.Fatal(err)
	}
	prog := func(src string) cel.Program {
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			f.Fatal(iss.Err())
		}
		p, err := env.Program(ast)
		if err != nil {
			f.Fatal(err)
		}
		return p
	}
	progs := map[string]cel.Program{}
	for _, src := range []string{`sum(ints)`, `ints.sum()`, `sum(doubles)`, `doubles.sum()`} {
		progs[src] = prog(src)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ints []int64
		var doubles []float64
		for b := raw; len(b) >= 8; b = b[8:] {
			u := binary.LittleEndian.Uint64(b)
			ints, doubles = append(ints, int64(u)), append(doubles, math.Float64frombits(u))
		}
		act := map[string]any{"ints": ints, "doubles": doubles}
		want, ok := sumOf(ints)
		for _, src := range []string{`sum(ints)`, `ints.sum()`} {
			out, _, err := progs[src].Eval(act)
			switch {
			case !ok && err == nil:
				t.Fatalf("%s of %v = %v, want an overflow error", src, ints, out)
			case ok && (err != nil || out.Value() != want):
				t.Fatalf("%s of %v = %v, %v; want %d", src, ints, out, err, want)
			}
		}
		var total float64
		for _, d := range doubles {
			total += d
		}
		for _, src := range []string{`sum(doubles)`, `doubles.sum()`} {
			out, _, err := progs[src].Eval(act)
			if err != nil {
				t.Fatalf("%s of %v: %v", src, doubles, err)
			}
			got, _ := out.Value().(float64)
			if got != total && !(math.IsNaN(got) && math.IsNaN(total)) {
				t.Fatalf("%s of %v = %v, want %v", src, doubles, got, total)
			}
		}
	})
}

// FuzzHistoryEval: an expression over a request and its uses, the uses
// being earlier requests' bodies as a guest sent them. Compiling and
// evaluating never panic; evaluation is bounded by the cost limit (not
// the deadline), gives a bool or an error, and is deterministic.
func FuzzHistoryEval(f *testing.F) {
	for _, s := range [][3]string{
		{`size(uses) == 0 || request.body.recipient == uses[0].request.body.recipient`, `{"recipient":"GB29"}`, `[{"recipient":"GB29"}]`},
		{`!uses.exists(u, u.request.body.recipient == request.body.recipient)`, `{"recipient":"a"}`, `[{"recipient":"b"},{"recipient":"a"}]`},
		{`uses.all(u, u.request.body.order_id == request.body.order_id)`, `{"order_id":7}`, `[{"order_id":7},{"order_id":"7"}]`},
		{`sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0`, `{"amount":40}`, `[{"amount":50.5},{"amount":"x"}]`},
		{`uses.map(u, int(u.request.body.n)).sum() < 10`, `{}`, `[{"n":9223372036854775807},{"n":1}]`},
		{`uses.filter(u, u.time > now - duration("1h")).size() < 3`, `{}`, `[{},{},{}]`},
		{`uses.all(u, !u.pending && u.time <= now)`, `{}`, `[{}]`},
		{`uses.map(u, uses.map(v, uses.map(w, double(u.request.body.a)))).size() > 0`, `{}`, `[{"a":1},{"a":2},{"a":3},{"a":4}]`},
		{`sum(uses.map(u, u.request.body.amount)) < 1`, `{}`, `[]`},
	} {
		f.Add(s[0], []byte(s[1]), []byte(s[2]))
	}
	c := New()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, src string, body, uses []byte) {
		e, err := c.Compile(src, netVars)
		if err != nil {
			return
		}
		b, err := kindapi.DecodeJSONValue(body)
		if err != nil {
			return
		}
		u, err := kindapi.DecodeJSONValue(uses)
		if err != nil {
			return
		}
		list, ok := u.([]any)
		if !ok || len(list) > kernel.MaxHistory {
			return
		}
		views := make([]any, len(list))
		for i, ub := range list {
			views[i] = map[string]any{"request": map[string]any{"body": ub}, kernel.UseTimeField: at.Add(-time.Duration(i) * time.Minute), kernel.UsePendingField: i == 0}
		}
		act := map[string]any{"request": map[string]any{"body": b}, kernel.UsesVar: views, kernel.NowVar: at}
		eval := func() (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ok, err := e.Eval(ctx, act)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("%s on %q after %q: evaluation ran to the deadline; the cost limit does not bound it", src, body, uses)
			}
			return ok, err
		}
		ok1, err1 := eval()
		if err1 != nil && ok1 {
			t.Fatalf("%s: true with an error %v", src, err1)
		}
		ok2, err2 := eval()
		if ok1 != ok2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s on %q after %q: %v, %v then %v, %v", src, body, uses, ok1, err1, ok2, err2)
		}
	})
}
