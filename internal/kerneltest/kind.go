// Package kerneltest provides what tests of the kernel and the kinds share:
// a small capability kind for kernel tests and benchmarks, Kind("test")
// with a numeric level and a set of ops, narrowed by lowering the level or
// dropping ops; a Buffer for logs written from many goroutines; and a
// Recorder, a loopback HTTP server that records every request it gets.
//
//	k, _ := kernel.New(kernel.Config{Engine: eng, Kinds: []kernel.Kind{kerneltest.New()}})
//	scope, _ := k.Grant("test", kernel.GrantContext{}, []byte(`{"level":3}`))
package kerneltest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
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
	noopEffect func(context.Context) (*kernel.Result, error)
}

var _ kernel.Kind = (*Kind)(nil)

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
	clearance *kernel.Label // nil: not a sink
}

// sink makes a scope granted with "clearance" a sink.
func (s *Scope) sink() *kernel.Sink {
	if s.clearance == nil {
		return nil
	}
	return &kernel.Sink{Clearance: *s.clearance}
}

var _ kernel.Scope = (*Scope)(nil)

type scopeJSON struct {
	Level     *int     `json:"level"`
	Ops       []string `json:"ops,omitempty"`
	Clearance []string `json:"clearance,omitempty"`
}

// MarshalJSON implements kernel.Scope.
func (s *Scope) MarshalJSON() ([]byte, error) {
	l := s.level
	return json.Marshal(scopeJSON{Level: &l, Ops: s.ops})
}

// Contains implements kernel.Scope.
func (s *Scope) Contains(o kernel.Scope) bool {
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

// Info implements kernel.Kind: amounts are whole units.
func (k *Kind) Info() kernel.Info {
	return kernel.Info{Ops: allOps, Amounts: units{}}
}

type units struct{}

func (units) ParseAmount(_ kernel.Scope, s string) (int64, error) {
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("amount %q is not a whole number", s)
	}
	return n, nil
}

func (units) FormatAmount(_ kernel.Scope, n int64) string { return fmt.Sprintf("%d units", n) }

// Describe implements kernel.Kind.
func (k *Kind) Describe(sc kernel.Scope) kernel.Description {
	s, err := kernel.ScopeAs[*Scope](sc, "test")
	if err != nil {
		return kernel.Description{}
	}
	d := kernel.Description{Fields: []kernel.Detail{{Name: "level", Value: fmt.Sprint(s.level)}, {Name: "ops", Value: strings.Join(s.ops, ", ")}}, Sink: s.sink()}
	if s.clearance != nil {
		d.Fields = append(d.Fields, kernel.Detail{Name: "clearance", Value: s.clearance.String()})
	}
	return d
}

// Grant reads {"level": N, "ops": [...]}; ops default to all.
func (k *Kind) Grant(_ kernel.GrantContext, spec []byte) (kernel.Scope, error) {
	var v scopeJSON
	if err := abi.DecodeJSON(spec, &v); err != nil {
		return nil, &kernel.FieldError{Field: "level", Msg: err.Error()}
	}
	s := &Scope{ops: slices.Clone(allOps)}
	if v.Level != nil {
		s.level = *v.Level
	}
	if v.Ops != nil {
		for _, op := range v.Ops {
			if !slices.Contains(allOps, op) {
				return nil, &kernel.FieldError{Field: "ops", Msg: fmt.Sprintf("unknown op %q", op)}
			}
		}
		s.ops = slices.Clone(v.Ops)
	}
	if v.Clearance != nil {
		c := kernel.NewLabel(v.Clearance, nil)
		s.clearance = &c
	}
	return s, nil
}

// Narrow lowers the level and drops ops; more is refused.
func (k *Kind) Narrow(parent kernel.Scope, req []byte) (kernel.Scope, error) {
	p, err := kernel.ScopeAs[*Scope](parent, "test")
	if err != nil {
		return nil, err
	}
	var v scopeJSON
	if err := abi.DecodeJSON(req, &v); err != nil {
		return nil, kernel.Errorf(abi.EINVAL, "narrow: %v", err)
	}
	s := &Scope{level: p.level, ops: slices.Clone(p.ops), clearance: p.clearance}
	if v.Clearance != nil {
		c := kernel.NewLabel(v.Clearance, nil)
		if p.clearance == nil || !c.CanFlowTo(*p.clearance) {
			return nil, kernel.Errorf(abi.EDENIED, "widening: clearance %v", v.Clearance)
		}
		s.clearance = &c
	}
	if v.Level != nil {
		if *v.Level > p.level {
			return nil, kernel.Errorf(abi.EDENIED, "widening: level %d above %d", *v.Level, p.level)
		}
		s.level = *v.Level
	}
	if v.Ops != nil {
		for _, op := range v.Ops {
			if !slices.Contains(p.ops, op) {
				return nil, kernel.Errorf(abi.EDENIED, "widening: op %q not in parent", op)
			}
		}
		s.ops = slices.Clone(v.Ops)
	}
	return s, nil
}

// Prepare implements the ops.
func (k *Kind) Prepare(call *kernel.Call) (kernel.Op, error) {
	s, err := kernel.ScopeAs[*Scope](call.Scope, "test")
	if err != nil {
		return kernel.Op{}, err
	}
	if !slices.Contains(s.ops, call.Op) {
		return kernel.Op{}, kernel.Errorf(abi.EDENIED, "op %q not in scope", call.Op)
	}
	op := kernel.Op{Sink: s.sink()}
	switch call.Op {
	case OpNoop:
		op.NoResult = true
		op.Effect = k.noopEffect
	case OpEcho:
		args := call.Args
		op.Effect = func(context.Context) (*kernel.Result, error) {
			k.Calls.Add(1)
			return &kernel.Result{Data: args}, nil
		}
	case OpLevel:
		op.Effect = func(context.Context) (*kernel.Result, error) {
			k.Calls.Add(1)
			return &kernel.Result{Data: []byte(fmt.Sprint(s.level))}, nil
		}
	case OpPanic:
		panic("kerneltest: panic op")
	case OpSplice:
		var a struct {
			Blob abi.Handle `json:"blob"`
		}
		if err := abi.DecodeJSON(call.Args, &a); err != nil {
			return kernel.Op{}, kernel.Errorf(abi.EINVAL, "splice: %v", err)
		}
		b, err := call.Blob(a.Blob)
		if err != nil {
			return kernel.Op{}, err
		}
		op.Effect = func(context.Context) (*kernel.Result, error) {
			k.Calls.Add(1)
			return &kernel.Result{Data: b.Bytes()}, nil
		}
	case OpSpend:
		var a struct {
			Amount int64 `json:"amount"`
		}
		if err := abi.DecodeJSON(call.Args, &a); err != nil || a.Amount <= 0 {
			return kernel.Op{}, kernel.Errorf(abi.EINVAL, "spend: want {\"amount\": N > 0}")
		}
		op.Amount, op.NoResult = a.Amount, true
		op.Show = func() kernel.Effect {
			return kernel.Effect{Summary: fmt.Sprintf("spend %d units", a.Amount),
				Details: []kernel.Detail{{Name: "amount", Value: fmt.Sprint(a.Amount)}}}
		}
		op.Effect = k.noopEffect
	case OpFail:
		op.NoResult = true
		op.Effect = func(context.Context) (*kernel.Result, error) {
			k.Calls.Add(1)
			return nil, kernel.Errorf(abi.EIO, "the effect ran and failed")
		}
	default:
		return kernel.Op{}, kernel.Errorf(abi.ENOTSUP, "no op %q", call.Op)
	}
	return op, nil
}

func (k *Kind) noop(context.Context) (*kernel.Result, error) {
	k.Calls.Add(1)
	return nil, nil
}
