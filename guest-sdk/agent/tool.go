package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// ToolDef is a tool offered to the model: its name, description and
// parameters (a JSON Schema) as the model is shown them, and the Go
// function the loop calls. Make one with Tool; Name, Description and
// Parameters may be changed afterwards (the arguments are still validated
// against the schema derived from the Go type).
type ToolDef struct {
	Name        string
	Description string
	Parameters  json.RawMessage

	run func(ctx *Ctx, args string, max int) (result string, toolErr error, argErr error)
	err error // from Tool: reported by Run
}

// toolNameRE is what the llm capability accepts as a tool name.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Tool binds fn as a tool the model may call. The parameters' schema is
// derived from Args (see SchemaOf), which must be a struct (struct{} for
// no parameters) or a map. Each call's arguments are checked against that
// schema and decoded strictly before fn sees them; arguments that do not
// fit are a tool error shown to the model, and fn is not called.
//
// fn's result is shown to the model: a string as it is, a Reference as
// {"ref":"$name"}, anything else as JSON (where References, at any depth,
// are {"ref":"$name"} too). fn's error is shown as a tool error: a kernel
// refusal (an error holding a *mandate.Error: EDENIED, EFLOW, ELIMIT...)
// as "error: ERRNO: the kernel's reason", anything else as
// "error: " + err.Error(). A panic in fn is a tool error too.
//
// An Args type that has no schema (see SchemaOf), or a name outside
// [A-Za-z0-9_-]{1,64}, makes Run fail before it calls the model.
func Tool[Args, Result any](name, description string, fn func(ctx *Ctx, args Args) (Result, error)) ToolDef {
	d := ToolDef{Name: name, Description: description}
	s, err := deriveSchema(reflectType[Args]())
	switch {
	case err != nil:
		d.err = err
	case s.typ != "object":
		d.err = fmt.Errorf("agent: tool %s: the arguments must be a struct or a map, not %s", name, reflectType[Args]())
	case fn == nil:
		d.err = fmt.Errorf("agent: tool %s: no function", name)
	default:
		d.Parameters = s.marshal()
	}
	d.run = func(ctx *Ctx, raw string, max int) (string, error, error) {
		args, err := decodeArgs[Args](raw, s, ctx.refs, max)
		if err != nil {
			return "", nil, err
		}
		res, err := callTool(fn, ctx, args)
		if err != nil {
			return "", err, nil
		}
		out, err := encodeResult(res, ctx.refs)
		if err != nil {
			return "", fmt.Errorf("tool %s returned a result that cannot be shown: %w", name, err), nil
		}
		return out, nil, nil
	}
	return d
}

func callTool[Args, Result any](fn func(*Ctx, Args) (Result, error), ctx *Ctx, args Args) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the tool failed: panic: %v", p)
		}
	}()
	return fn(ctx, args)
}

// encodeResult renders a tool's result for the model.
func encodeResult(v any, refs *refTable) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case nil:
		return "null", nil
	}
	var b []byte
	err := withCodec(refs, func() error {
		var err error
		b, err = json.Marshal(v)
		return err
	})
	if err != nil {
		var me *json.MarshalerError
		if errors.As(err, &me) {
			return "", me.Unwrap()
		}
		return "", errors.New(plainJSONError(err))
	}
	return string(b), nil
}

// toolError is the content of the tool message for a failed call: a
// kernel refusal names its errno and the kernel's reason, so a model can
// tell a denial (EDENIED), a flow refusal (EFLOW) or a spent budget
// (ELIMIT) from a tool's own failure and try something else.
func toolError(err error) string {
	var me *mandate.Error
	if errors.As(err, &me) && me.Errno != abi.ESUCCESS {
		reason := me.Reason
		if reason == "" {
			reason = err.Error()
		}
		return "error: " + me.Errno.String() + ": " + reason
	}
	return "error: " + err.Error()
}

// Ctx is what a tool function gets besides its arguments: the call, and
// the references the run holds.
type Ctx struct {
	Step   int    // the step (model answer) that asked for the call, from 1
	Tool   string // the tool's name
	CallID string // the model's id of the call
	refs   *refTable
}

// Ref returns the blob a reference names: "$name" as the model wrote it
// (a leading "$" may be left out). Splice it rather than read it: reading
// raises this task's label. A name the run does not hold is an error
// (return it, and the model is told).
func (c *Ctx) Ref(name string) (mandate.Blob, error) {
	if c.refs == nil {
		return mandate.Blob{}, fmt.Errorf("unknown reference %q", name)
	}
	if b, ok := c.refs.get(name); ok {
		return b, nil
	}
	if b, ok := c.refs.get("$" + name); ok {
		return b, nil
	}
	return mandate.Blob{}, c.refs.unknown(name)
}

// Refs lists the names of the references the run holds, in the order
// they were made.
func (c *Ctx) Refs() []string {
	if c.refs == nil {
		return nil
	}
	return append([]string(nil), c.refs.names...)
}
