package net

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// A net capability bound to values: "pay this one bill" through someone's
// API, without granting the whole API.
func TestActivationConstraints(t *testing.T) {
	k := New()
	s := mustGrant(t, k, `{"origin":"https://bank.example","methods":["GET","POST"],"paths":["/v1"]}`)
	c, err := constraint.New().Compile(
		`request.method == "POST" && request.path == "/v1/transfers" && request.body.recipient in ["GB29NWBK60161331926819"] && request.body.amount <= 50 && request.query.dry == "no"`,
		k.Info().Vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		want bool
		err  bool
	}{
		{`{"method":"post","url":"/v1/transfers?dry=no","body":"eyJyZWNpcGllbnQiOiJHQjI5TldCSzYwMTYxMzMxOTI2ODE5IiwiYW1vdW50Ijo0MH0="}`, true, false},         // {"recipient":"GB29…","amount":40}
		{`{"method":"POST","url":"/v1/transfers?dry=no","body":"eyJyZWNpcGllbnQiOiJERTAwRVZJTCIsImFtb3VudCI6NDB9"}`, false, false},                            // recipient DE00EVIL
		{`{"method":"POST","url":"/v1/./x/../transfers?dry=no","body":"eyJyZWNpcGllbnQiOiJHQjI5TldCSzYwMTYxMzMxOTI2ODE5IiwiYW1vdW50Ijo5MDB9"}`, false, false}, // amount 900, path canonicalised
		{`{"method":"POST","url":"/v1/transfers?dry=no","body":"bm90IGpzb24="}`, false, true},                                                                 // body "not json": no field
	} {
		act, err := kerneltest.Vars(k, kindtest.NewCall("fetch", []byte(tc.args), s, kindapi.TaskInfo{}, nil, nil))
		if err != nil {
			t.Fatalf("Activation(%s): %v", tc.args, err)
		}
		got, err := c.Eval(context.Background(), act)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v (error %v)", tc.args, got, err, tc.want, tc.err)
		}
	}
}

// TestActivationCannotBeFooled: what a constraint judges is what is sent.
// Each request here would have passed `request.query.to != "PYY"` (or the
// header check) had the constraint seen a placeholder, a query Go cannot
// parse, or only the first of two values.
func TestActivationCannotBeFooled(t *testing.T) {
	k := New()
	s := mustGrant(t, k, `{"origin":"https://flights.example","paths":["/search"]}`)
	c, err := constraint.New().Compile(`request.query.to != "PYY" && !has(request.query.admin) && (!("X-Mode" in request.headers) || request.headers["X-Mode"] != "debug")`, k.Info().Vars)
	if err != nil {
		t.Fatal(err)
	}
	pyy := kindapi.NewBlob([]byte("PYY"), kindapi.Label{})
	blobs := func(h abi.Handle) (*kindapi.Blob, error) {
		if h == 7 {
			return pyy, nil
		}
		return nil, kindapi.Errorf(abi.EBADHANDLE, "no blob %d", h)
	}
	for _, tc := range []struct {
		name, args string
		ok         bool // the constraint is evaluable and holds
	}{
		{"plain", `{"method":"GET","url":"/search?to=LIS"}`, true},
		{"plain refused", `{"method":"GET","url":"/search?to=PYY"}`, false},
		{"spliced value", `{"method":"GET","url":"/search?to={{mandate:splice:0}}","splice":[7]}`, false},
		{"semicolon", `{"method":"GET","url":"/search?to=LIS&admin=1&x=;"}`, false},
		{"repeated, different", `{"method":"GET","url":"/search?to=LIS&to=PYY"}`, false},
		{"repeated, same", `{"method":"GET","url":"/search?to=LIS&to=LIS"}`, true},
		{"header twice", `{"method":"GET","url":"/search?to=LIS","header":{"X-Mode":["safe","debug"]}}`, false},
		{"header in two cases", `{"method":"GET","url":"/search?to=LIS","header":{"X-Mode":["safe"],"x-mode":["debug"]}}`, false},
		{"spliced header", `{"method":"GET","url":"/search?to=LIS","header":{"X-Mode":["{{mandate:splice:0}}"]},"splice":[7]}`, true},
	} {
		act, err := kerneltest.Vars(k, kindtest.NewCall("fetch", []byte(tc.args), s, kindapi.TaskInfo{}, nil, blobs))
		var got bool
		if err == nil {
			got, err = c.Eval(context.Background(), act)
		}
		if (err == nil && got) != tc.ok {
			t.Errorf("%s: holds=%v err=%v; want ok=%v", tc.name, got, err, tc.ok)
		}
	}
}
