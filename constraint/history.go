package constraint

import (
	"errors"
	"math"
	"slices"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/mandatevm/mandate/kernel"
)

// History: what a constraint sees of earlier uses.
//
// Every expression may read two variables besides its kind's:
//
//	uses   the uses of the capability that carries the constraint and of
//	       everything derived from it, newest first, at most
//	       kernel.MaxHistory: each the variables its call was checked
//	       with (for net, u.request), plus u.time (a timestamp: when the
//	       call was decided) and u.pending (true while its effect has not
//	       ended)
//	now    a timestamp: when this call is decided
//
// and a function:
//
//	sum(list) or list.sum()   the total of a list(int) (an int; overflow is
//	                          an evaluation error) or of a list(double) (a
//	                          double); 0 or 0.0 for an empty list
//
// so that, on a net capability,
//
//	size(uses) == 0 || request.body.recipient == uses[0].request.body.recipient
//	!uses.exists(u, u.request.body.recipient == request.body.recipient)
//	uses.all(u, u.request.body.order_id == request.body.order_id)
//	sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0
//	uses.filter(u, u.time > now - duration("1h")).size() < 3
//
// bind the first recipient, allow one call per recipient, keep one order
// id, bound a total and allow three calls an hour. The list's elements are
// dynamic (JSON values), so sum needs them converted to one type:
// sum(uses.map(u, u.request.body.amount)) does not compile, since whether
// it is an int or a double would depend on the data (JSON's 10 is an int,
// 10.5 a double).
//
// What the kernel records, for how long, and what a pending use means
// are in kernel/history.go.

// sumOverloads are the overloads of sum, global and member.
var sumOverloads = []string{sumListInt, sumListDouble, listIntSum, listDoubleSum}

const (
	sumListInt    = "sum_list_int"
	sumListDouble = "sum_list_double"
	listIntSum    = "list_int_sum"
	listDoubleSum = "list_double_sum"
)

// historyOptions declares uses, now and sum. Each sum costs one unit per
// element on top of the call, as CEL's own list functions do.
func historyOptions() []cel.EnvOption {
	ints, doubles := []*cel.Type{cel.ListType(cel.IntType)}, []*cel.Type{cel.ListType(cel.DoubleType)}
	perElement := func(list cost.QuantityExpr) cost.OverloadModelOption {
		return cost.EvalCost(cost.Sum(cost.Const(cost.CallCost), cost.Length(list)))
	}
	return []cel.EnvOption{
		cel.Variable(kernel.UsesVar, cel.ListType(cel.DynType)),
		cel.Variable(kernel.NowVar, cel.TimestampType),
		cel.Function("sum",
			cel.Overload(sumListInt, ints, cel.IntType, cel.UnaryBinding(sumInts)),
			cel.Overload(sumListDouble, doubles, cel.DoubleType, cel.UnaryBinding(sumDoubles)),
			cel.MemberOverload(listIntSum, ints, cel.IntType, cel.UnaryBinding(sumInts)),
			cel.MemberOverload(listDoubleSum, doubles, cel.DoubleType, cel.UnaryBinding(sumDoubles)),
		),
		cel.CostModel(
			cost.Overload(sumListInt, perElement(cost.Arg(0))),
			cost.Overload(sumListDouble, perElement(cost.Arg(0))),
			cost.MemberOverload(listIntSum, perElement(cost.Target())),
			cost.MemberOverload(listDoubleSum, perElement(cost.Target())),
		),
	}
}

// sumInts totals a list of ints, exactly: an overflow is an error, never
// a wrapped total a bound would then pass.
func sumInts(v ref.Val) ref.Val {
	l, ok := v.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var total int64
	for it := l.Iterator(); it.HasNext() == types.True; {
		e := it.Next()
		n, ok := e.(types.Int)
		if !ok {
			return types.NewErr("sum of a list(int) holding a %s", e.Type())
		}
		if (n > 0 && total > math.MaxInt64-int64(n)) || (n < 0 && total < math.MinInt64-int64(n)) {
			return types.NewErr("sum overflows an int")
		}
		total += int64(n)
	}
	return types.Int(total)
}

// sumDoubles totals a list of doubles.
func sumDoubles(v ref.Val) ref.Val {
	l, ok := v.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var total float64
	for it := l.Iterator(); it.HasNext() == types.True; {
		e := it.Next()
		d, ok := e.(types.Double)
		if !ok {
			return types.NewErr("sum of a list(double) holding a %s", e.Type())
		}
		total += float64(d)
	}
	return types.Double(total)
}

// checkSums refuses a sum whose list's element type the checker could not
// tell (a list(dyn): both overloads match), which would be an int or a
// double depending on the data.
func checkSums(a *cel.Ast) error {
	for _, r := range a.NativeRep().ReferenceMap() {
		if len(r.OverloadIDs) > 1 && slices.ContainsFunc(r.OverloadIDs, func(id string) bool { return slices.Contains(sumOverloads, id) }) {
			return errors.New("sum of a list whose elements may be ints or doubles: convert them, e.g. sum(uses.map(u, double(u.request.body.amount)))")
		}
	}
	return nil
}

// references lists the variables a checked expression reads, from the
// checker's references (an iteration variable of the same name counts
// too: the answer may say yes when it need not, never no when it must).
func references(a *cel.Ast) []string {
	var names []string
	for _, r := range a.NativeRep().ReferenceMap() {
		if r.Name != "" && len(r.OverloadIDs) == 0 && !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	slices.Sort(names)
	return names
}
