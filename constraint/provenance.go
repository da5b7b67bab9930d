package constraint

import (
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/parser"

	"github.com/mandatevm/mandate/kernel"
)

// Provenance: where a call's values came from.
//
// A guest may splice a part of a blob it holds into a call by reference
// (a JSON path, extracted by the kernel, never read by the guest), and the
// kind records, for each value of its variables that was spliced so, the
// label of that part and its path (kindapi.Op.Provenance). Two functions
// read it, each taking a field of a variable, written as a path:
//
//	spliced(request.body.recipient)       // true if the whole value was spliced from a part
//	from(request.body.recipient).integ    // that part's integrity taints (a list of strings)
//	from(request.body.recipient).conf     // its confidentiality tags
//	from(request.body.recipient).path     // its path in the blob it came from
//
// So a payment's recipient can be bound to the bank's own record of who
// sent a transaction:
//
//	spliced(request.body.recipient) && "bank:transactions.sender" in from(request.body.recipient).integ
//
// Membership, not equality: a part carries its field's taint joined with
// the label of the task that fetched it, so a task that read anything
// else first (its profile, the user's request) holds a part whose integ
// has more than the one taint. What keeps the others out is the sink's
// refuses_taints (a part carrying a subject's bank:tx is refused, EFLOW).
//
// A value the guest typed is not spliced; from() of it is an evaluation
// error, which denies. They are macros: spliced(x) becomes `"x" in
// mandate_provenance`, from(x) becomes `mandate_provenance["x"]`, so
// they cost what a map lookup costs. Their argument must be a variable's
// field path (a.b.c, a["b"], a.b[0]); anything else does not compile.

// provenanceOptions declares the provenance variable and the two macros.
func provenanceOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable(kernel.ProvenanceVar, cel.MapType(cel.StringType, cel.DynType)),
		cel.Macros(
			parser.NewGlobalMacro("spliced", 1, func(eh parser.ExprHelper, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
				place, err := placeOf(eh, args[0])
				if err != nil {
					return nil, err
				}
				return eh.NewCall(operators.In, eh.NewLiteral(types.String(place)), eh.NewIdent(kernel.ProvenanceVar)), nil
			}),
			parser.NewGlobalMacro("from", 1, func(eh parser.ExprHelper, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
				place, err := placeOf(eh, args[0])
				if err != nil {
					return nil, err
				}
				return eh.NewCall(operators.Index, eh.NewIdent(kernel.ProvenanceVar), eh.NewLiteral(types.String(place))), nil
			}),
		),
	}
}

// placeOf writes a field path expression as the place the kind's
// provenance is keyed by (kindapi.Op.Provenance): request.body.recipient,
// request.body["recipient"] -> request.body.recipient, request.body.items[0]
// -> request.body.items[0].
func placeOf(eh parser.ExprHelper, e ast.Expr) (string, *common.Error) {
	var rev []string // the path's steps, last first: ".name" or "[N]"
	bad := func(e ast.Expr) (string, *common.Error) {
		return "", eh.NewError(e.ID(), `spliced() and from() take a field path of a variable (a.b, a["b"], a.b[0])`)
	}
	for {
		switch e.Kind() {
		case ast.IdentKind:
			if e.AsIdent() == kernel.ProvenanceVar {
				return bad(e)
			}
			var b strings.Builder
			b.WriteString(e.AsIdent())
			for i := len(rev) - 1; i >= 0; i-- {
				b.WriteString(rev[i])
			}
			return b.String(), nil
		case ast.SelectKind:
			s := e.AsSelect()
			if s.IsTestOnly() {
				return bad(e)
			}
			rev = append(rev, "."+s.FieldName())
			e = s.Operand()
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
				return bad(e)
			}
			switch k := c.Args()[1].AsLiteral().(type) {
			case types.String:
				// The kind refuses such names in a body splicing parts:
				// a["b.c"] would name the same place as a.b.c.
				if strings.ContainsAny(string(k), ".[]") {
					return "", eh.NewError(e.ID(), `spliced() and from() take member names without ".", "[" or "]"`)
				}
				rev = append(rev, "."+string(k))
			case types.Int:
				rev = append(rev, "["+strconv.FormatInt(int64(k), 10)+"]")
			default:
				return bad(e)
			}
			e = c.Args()[0]
		default:
			return bad(e)
		}
	}
}
