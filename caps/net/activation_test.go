package net

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
)

// A net capability bound to values: "pay this one bill" through someone's
// API, without granting the whole API.
func TestActivationConstraints(t *testing.T) {
	k := New()
	s := mustGrant(t, k, `{"origin":"https://bank.example","methods":["GET","POST"],"paths":["/v1"]}`)
	c, err := constraint.New().Compile(
		`request.method == "POST" && request.path == "/v1/transfers" && request.body.recipient in ["GB29NWBK60161331926819"] && request.body.amount <= 50 && request.query.dry == "no"`,
		k.Vars())
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
		act, err := k.Activation(kernel.NewCall("fetch", []byte(tc.args), s, kernel.TaskInfo{}, nil, nil))
		if err != nil {
			t.Fatalf("Activation(%s): %v", tc.args, err)
		}
		got, err := c.Eval(context.Background(), act)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v (error %v)", tc.args, got, err, tc.want, tc.err)
		}
	}
}
