// Package kerneltest provides what tests of the kernel and the kinds share:
// a small capability kind for kernel tests and benchmarks, Kind("test")
// with a numeric level and a set of ops, narrowed by lowering the level or
// dropping ops; a Buffer for logs written from many goroutines; and a
// Recorder, a loopback HTTP server that records every request it gets.
//
//	k, _ := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kerneltest.New()}})
//	scope, _ := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":3}`))
package kerneltest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Ops of the test kind.
const (
	OpNoop  = "noop"  // does nothing, returns no blob
	OpEcho  = "echo"  // returns its arguments as a blob
	OpLevel = "level" // returns the scope's level as a decimal blob
	OpPanic = "panic" // panics inside the kind (the kernel must deny, not crash)
	// OpSplice returns the bytes of the blob named by {"blob": handle},
	// resolved through Call.Blob as a kind splicing data into a request.
	OpSplice = "splice"
	// OpSpend spends {"amount": N} units (the kind's Info.Amounts), for
	// tests of budgets; it returns nothing.
	OpSpend = "spend"
	// OpFail fails in its effect (EIO) after the effect ran, for tests of
	// what a failed effect counts.
	OpFail = "fail"
)

var allOps = []string{OpNoop, OpEcho, OpLevel, OpPanic, OpSplice, OpSpend, OpFail}

// Kind is the test kind. Calls counts successful invocations.
type Kind struct {
	Calls atomic.Int64
	// noopEffect is k.noop bound once, so a no-op call allocates nothing.
	noopEffect func(context.Context) (*kindapi.Result, error)
}

var _ kindapi.Kind = (*Kind)(nil)

// New returns a test kind.
func New() *Kind {
	k := &Kind{}
	k.noopEffect = k.noop
	return k
}

// Scope is a level and the ops allowed.
type Scope struct {
	level     int
	ops       []string
	clearance *kindapi.Label // nil: not a sink
}

// sink makes a scope granted with "clearance" a sink.
func (s *Scope) sink() *kindapi.Sink {
	if s.clearance == nil {
		return nil
	}
	return &kindapi.Sink{Clearance: *s.clearance}
}

var _ kindapi.Scope = (*Scope)(nil)

type scopeJSON struct {
	Level     *int     `json:"level"`
	Ops       []string `json:"ops,omitempty"`
	Clearance []string `json:"clearance,omitempty"`
}

// MarshalJSON implements kindapi.Scope.
func (s *Scope) MarshalJSON() ([]byte, error) {
	l := s.level
	return json.Marshal(scopeJSON{Level: &l, Ops: s.ops})
}

// Contains implements kindapi.Scope.
func (s *Scope) Contains(o kindapi.Scope) bool {
	t, ok := o.(*Scope)
	if !ok || t.level > s.level {
		return false
	}
	if s.clearance != nil && (t.clearance == nil || !t.clearance.CanFlowTo(*s.clearance)) {
		return false
	}
	for _, op := range t.ops {
		if !slices.Contains(s.ops, op) {
			return false
		}
	}
	return true
}

// Level is the scope's level.
func (s *Scope) Level() int { return s.level }

func (k *Kind) Name() string { return "test" }

// Info implements kindapi.Kind: amounts are whole units.
func (k *Kind) Info() kindapi.Info {
	return kindapi.Info{Ops: allOps, Amounts: units{}}
}

type units struct{}

func (units) ParseAmount(_ kindapi.Scope, s string) (int64, error) {
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("amount %q is not a whole number", s)
	}
	return n, nil
}

func (units) FormatAmount(_ kindapi.Scope, n int64) string { return fmt.Sprintf("%d units", n) }

// Describe implements kindapi.Kind.
func (k *Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, "test")
	if err != nil {
		return kindapi.Description{}
	}
	d := kindapi.Description{Fields: []kindapi.Detail{{Name: "level", Value: fmt.Sprint(s.level)}, {Name: "ops", Value: strings.Join(s.ops, ", ")}}, Sink: s.sink()}
	if s.clearance != nil {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "clearance", Value: s.clearance.String()})
	}
	return d
}

// Grant reads {"level": N, "ops": [...]}; ops default to all.
func (k *Kind) Grant(_ kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	var v scopeJSON
	if err := abi.DecodeJSON(spec, &v); err != nil {
		return nil, &kindapi.FieldError{Field: "level", Msg: err.Error()}
	}
	s := &Scope{ops: slices.Clone(allOps)}
	if v.Level != nil {
		s.level = *v.Level
	}
	if v.Ops != nil {
		for _, op := range v.Ops {
			if !slices.Contains(allOps, op) {
				return nil, &kindapi.FieldError{Field: "ops", Msg: fmt.Sprintf("unknown op %q", op)}
			}
		}
		s.ops = slices.Clone(v.Ops)
	}
	if v.Clearance != nil {
		c := kindapi.NewLabel(v.Clearance, nil)
		s.clearance = &c
	}
	return s, nil
}

// Narrow lowers the level and drops ops; more is refused.
func (k *Kind) Narrow(parent kindapi.Scope, req []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, "test")
	if err != nil {
		return nil, err
	}
	var v scopeJSON
	if err := abi.DecodeJSON(req, &v); err != nil {
		return nil, kindapi.Errorf(abi.EINVAL, "narrow: %v", err)
	}
	s := &Scope{level: p.level, ops: slices.Clone(p.ops), clearance: p.clearance}
	if v.Clearance != nil {
		c := kindapi.NewLabel(v.Clearance, nil)
		if p.clearance == nil || !c.CanFlowTo(*p.clearance) {
			return nil, kindapi.Errorf(abi.EDENIED, "widening: clearance %v", v.Clearance)
		}
		s.clearance = &c
	}
	if v.Level != nil {
		if *v.Level > p.level {
			return nil, kindapi.Errorf(abi.EDENIED, "widening: level %d above %d", *v.Level, p.level)
		}
		s.level = *v.Level
	}
	if v.Ops != nil {
		for _, op := range v.Ops {
			if !slices.Contains(p.ops, op) {
				return nil, kindapi.Errorf(abi.EDENIED, "widening: op %q not in parent", op)
			}
		}
		s.ops = slices.Clone(v.Ops)
	}
	return s, nil
}

// Prepare implements the ops.
func (k *Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	s, err := kindapi.ScopeAs[*Scope](call.Scope, "test")
	if err != nil {
		return kindapi.Op{}, err
	}
	if !slices.Contains(s.ops, call.Op) {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "op %q not in scope", call.Op)
	}
	op := kindapi.Op{Sink: s.sink()}
	switch call.Op {
	case OpNoop:
		op.NoResult = true
		op.Effect = k.noopEffect
	case OpEcho:
		args := call.Args
		op.Effect = func(context.Context) (*kindapi.Result, error) {
			k.Calls.Add(1)
			return &kindapi.Result{Data: args}, nil
		}
	case OpLevel:
		op.Effect = func(context.Context) (*kindapi.Result, error) {
			k.Calls.Add(1)
			return &kindapi.Result{Data: []byte(fmt.Sprint(s.level))}, nil
		}
	case OpPanic:
		panic("kerneltest: panic op")
	case OpSplice:
		var a struct {
			Blob abi.Handle `json:"blob"`
		}
		if err := abi.DecodeJSON(call.Args, &a); err != nil {
			return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "splice: %v", err)
		}
		b, err := call.Blob(a.Blob)
		if err != nil {
			return kindapi.Op{}, err
		}
		op.Effect = func(context.Context) (*kindapi.Result, error) {
			k.Calls.Add(1)
			return &kindapi.Result{Data: b.Bytes()}, nil
		}
	case OpSpend:
		var a struct {
			Amount int64 `json:"amount"`
		}
		if err := abi.DecodeJSON(call.Args, &a); err != nil || a.Amount <= 0 {
			return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "spend: want {\"amount\": N > 0}")
		}
		op.Amount, op.NoResult = a.Amount, true
		op.Show = func() kindapi.Preview {
			return kindapi.Preview{Summary: fmt.Sprintf("spend %d units", a.Amount),
				Details: []kindapi.Detail{{Name: "amount", Value: fmt.Sprint(a.Amount)}}}
		}
		op.Effect = k.noopEffect
	case OpFail:
		op.NoResult = true
		op.Effect = func(context.Context) (*kindapi.Result, error) {
			k.Calls.Add(1)
			return nil, kindapi.Errorf(abi.EIO, "the effect ran and failed")
		}
	default:
		return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "no op %q", call.Op)
	}
	return op, nil
}

func (k *Kind) noop(context.Context) (*kindapi.Result, error) {
	k.Calls.Add(1)
	return nil, nil
}
