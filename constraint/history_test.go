package constraint

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// netVars are the variables of a net capability's constraints.
var netVars = []string{"request"}

// histAct is an activation as the kernel builds it for a net call: the
// request's body, the earlier uses' bodies (newest first, each at its
// age), and now.
func histAct(t *testing.T, body string, uses []string, ages ...time.Duration) map[string]any {
	t.Helper()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	req := func(doc string) map[string]any {
		v, err := kindapi.DecodeJSONValue([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"method": "POST", "path": "/transfers", "body": v}
	}
	list := make([]any, len(uses))
	for i, u := range uses {
		age := time.Minute
		if i < len(ages) {
			age = ages[i]
		}
		list[i] = map[string]any{"request": req(u), kernel.UseTimeField: at.Add(-age), kernel.UsePendingField: false}
	}
	return map[string]any{"request": req(body), kernel.UsesVar: list, kernel.NowVar: at}
}

// TestHistoryExpressions: the rules of issue 16, one line each, on the
// activation the kernel builds.
func TestHistoryExpressions(t *testing.T) {
	const (
		bind    = `size(uses) == 0 || request.body.recipient == uses[0].request.body.recipient`
		once    = `!uses.exists(u, u.request.body.recipient == request.body.recipient)`
		sameID  = `uses.all(u, u.request.body.order_id == request.body.order_id)`
		total   = `sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0`
		minor   = `uses.map(u, int(u.request.body.minor)).sum() + int(request.body.minor) <= 10000`
		perHour = `uses.filter(u, u.time > now - duration("1h")).size() < 3`
	)
	c := New()
	for _, tc := range []struct {
		src, body string
		uses      []string
		ages      []time.Duration
		want      bool
	}{
		{bind, `{"recipient":"GB29"}`, nil, nil, true},
		{bind, `{"recipient":"GB29"}`, []string{`{"recipient":"GB29"}`}, nil, true},
		{bind, `{"recipient":"DE00"}`, []string{`{"recipient":"GB29"}`}, nil, false},
		{once, `{"recipient":"bob"}`, []string{`{"recipient":"alice"}`}, nil, true},
		{once, `{"recipient":"alice"}`, []string{`{"recipient":"carol"}`, `{"recipient":"alice"}`}, nil, false},
		{sameID, `{"order_id":7}`, []string{`{"order_id":7}`, `{"order_id":7}`}, nil, true},
		{sameID, `{"order_id":8}`, []string{`{"order_id":7}`}, nil, false},
		{sameID, `{"order_id":8}`, nil, nil, true},
		// JSON's 40 is an int, 50.5 a double: double() makes them one type.
		{total, `{"amount":9.5}`, []string{`{"amount":40}`, `{"amount":50.5}`}, nil, true},
		{total, `{"amount":10}`, []string{`{"amount":40}`, `{"amount":50.5}`}, nil, false},
		{total, `{"amount":100}`, nil, nil, true},
		{minor, `{"minor":5000}`, []string{`{"minor":5000}`}, nil, true},
		{minor, `{"minor":5001}`, []string{`{"minor":5000}`}, nil, false},
		{perHour, `{}`, []string{`{}`, `{}`}, nil, true},
		{perHour, `{}`, []string{`{}`, `{}`, `{}`}, nil, false},
		{perHour, `{}`, []string{`{}`, `{}`, `{}`}, []time.Duration{time.Minute, 30 * time.Minute, 2 * time.Hour}, true},
	} {
		e, err := c.Compile(tc.src, netVars)
		if err != nil {
			t.Fatalf("Compile(%s): %v", tc.src, err)
		}
		got, err := e.Eval(context.Background(), histAct(t, tc.body, tc.uses, tc.ages...))
		if err != nil || got != tc.want {
			t.Errorf("%s on %s after %v = %v, %v; want %v", tc.src, tc.body, tc.uses, got, err, tc.want)
		}
	}
}

// TestSum: sum of ints is an exact int, of doubles a double, of nothing
// the type's zero; a sum whose list's element type is unknown does not
// compile; an overflow is an error, never a wrapped total.
func TestSum(t *testing.T) {
	c := New()
	for _, tc := range []struct {
		src  string
		want bool
		err  string
	}{
		{`sum([1, 2, 3]) == 6`, true, ""},
		{`[1, 2, 3].sum() == 6`, true, ""},
		{`sum([0.5, 0.25]) == 0.75`, true, ""},
		{`sum([]) == 0`, true, ""},
		{`sum(args.xs.map(x, double(x))) == 3.5`, true, ""},
		{`sum(args.xs.map(x, double(x))) + 1.0 > 4.0`, true, ""},
		{`args.xs.map(x, int(x)).sum() == 3`, true, ""},
		{`args.none.map(x, double(x)).sum() + 1.0 == 1.0`, true, ""},
		{`args.none.map(x, int(x)).sum() + 1 == 1`, true, ""},
		{`sum([9223372036854775807, 1]) > 0`, false, "overflow"},
		{`sum([-9223372036854775807, -2]) < 0`, false, "overflow"},
	} {
		e, err := c.Compile(tc.src, []string{"args"})
		if err != nil {
			t.Fatalf("Compile(%s): %v", tc.src, err)
		}
		got, err := e.Eval(context.Background(), map[string]any{"args": map[string]any{"xs": []any{int64(1), 2.5}, "none": []any{}}})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s = %v, %v; want error %q", tc.src, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %v", tc.src, got, err, tc.want)
		}
	}
	for _, src := range []string{
		`sum(args.xs) > 0`,                        // dyn
		`sum(args.xs.map(x, x)) > 0`,              // list(dyn)
		`args.xs.sum() > 0`,                       // dyn, member
		`sum(uses.map(u, u.args.amount)) <= 100`,  // the trap the error names
		`sum(["a"]) == "a"`,                       // no overload
		`sum([1u]) == 1u`,                         // no overload
		`sum(1) == 1`,                             // not a list
		`sum([1], [2]) == 3`,                      // arity
		`sum(uses.map(u, double(u.a))) == "nope"`, // a double is not a string
	} {
		if _, err := c.Compile(src, []string{"args"}); err == nil {
			t.Errorf("Compile(%s) succeeded, want an error", src)
		} else if strings.Contains(src, "args.xs") && strings.HasPrefix(src, "sum(args") && !strings.Contains(err.Error(), "convert") {
			t.Errorf("Compile(%s): %v; want the error to say to convert the elements", src, err)
		}
	}
}

// TestSumCost: sum costs one unit per element on top of the call, so a
// cost limit bounds it like CEL's own list functions.
func TestSumCost(t *testing.T) {
	env, err := cel.NewEnv(append(historyOptions(), cel.Variable("xs", cel.ListType(cel.IntType)))...)
	if err != nil {
		t.Fatal(err)
	}
	costOf := func(src string, n int) uint64 {
		t.Helper()
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		prg, err := env.Program(ast, cel.CostTracking(nil))
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]int64, n)
		_, det, err := prg.Eval(map[string]any{"xs": xs})
		if err != nil {
			t.Fatal(err)
		}
		return *det.ActualCost()
	}
	for _, src := range []string{`sum(xs) >= 0`, `xs.sum() >= 0`} {
		small, large := costOf(src, 10), costOf(src, 10010)
		if large-small != 10000 {
			t.Errorf("%s: cost %d for 10 elements, %d for 10010; want 10000 more", src, small, large)
		}
	}
	// The kernel's compiler stops a sum past its limit.
	e, err := New(WithCostLimit(1000)).Compile(`sum(args.xs.map(x, int(x))) >= 0`, []string{"args"})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]any, 2000)
	for i := range xs {
		xs[i] = int64(i)
	}
	if _, err := e.Eval(context.Background(), map[string]any{"args": map[string]any{"xs": xs}}); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("a sum over 2000 elements with a limit of 1000: %v, want a cost limit error", err)
	}
}

// TestReferences: a compiled expression says which variables it reads,
// so the kernel keeps a history only where one is read.
func TestReferences(t *testing.T) {
	c := New()
	for _, tc := range []struct {
		src       string
		uses, now bool
	}{
		{`request.method == "GET"`, false, false},
		{`size(uses) < 3`, true, false},
		{`now > timestamp("2026-01-01T00:00:00Z")`, false, true},
		{`uses.filter(u, u.time > now - duration("1h")).size() < 3`, true, true},
		{`has(request.body.x) || uses.exists(u, u.request.body.x == 1)`, true, false},
	} {
		e, err := c.Compile(tc.src, netVars)
		if err != nil {
			t.Fatalf("Compile(%s): %v", tc.src, err)
		}
		r := e.(kernel.Referencer)
		if got := r.References(kernel.UsesVar); got != tc.uses {
			t.Errorf("%s: References(uses) = %v, want %v", tc.src, got, tc.uses)
		}
		if got := r.References(kernel.NowVar); got != tc.now {
			t.Errorf("%s: References(now) = %v, want %v", tc.src, got, tc.now)
		}
		if !r.References("request") && strings.Contains(tc.src, "request") {
			t.Errorf("%s: References(request) = false", tc.src)
		}
	}
}

// TestHistoryMissing: a history or a time the kernel did not give (a
// constraint that did not say it reads them) cannot be evaluated.
func TestHistoryMissing(t *testing.T) {
	for _, src := range []string{`size(uses) == 0`, `now > timestamp("2026-01-01T00:00:00Z")`} {
		ok, err := eval(t, src, netVars, `{}`)
		if err == nil || ok {
			t.Errorf("%s without it in the activation: %v, %v; want an error", src, ok, err)
		}
	}
}

// sumOf is what sum of a list of Go numbers must be: ok false when the
// int total overflows.
func sumOf(ints []int64) (total int64, ok bool) {
	for _, n := range ints {
		if (n > 0 && total > math.MaxInt64-n) || (n < 0 && total < math.MinInt64-n) {
			return 0, false
		}
		total += n
	}
	return total, true
}
