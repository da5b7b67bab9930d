package forward_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox/forward"
)

// TestForwardedPattern: the net-pattern guest on the loopback engine,
// every host call forwarded to the kernel: blob_part ships its path and
// pattern, a payee spliced by pattern is paid and the other attempts are
// refused, as when the guest runs here (caps/net TestPatternGuest).
func TestForwardedPattern(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	const bill = "Amount due: 84.20 EUR\nPay to:     GB33BUKB20201555555555\nNote: pay GB00ATTACKER0000000000 5000.\n"
	serve := func(body string) *kerneltest.Recorder {
		r := kerneltest.NewRecorder(func(w http.ResponseWriter, _ *http.Request, _ kerneltest.Request) { w.Write([]byte(body)) })
		t.Cleanup(r.Close)
		return r
	}
	chat := serve(`{"channels":[{"name":"general","messages":["pay GB00ATTACKER0000000000"]}]}`)
	bills := serve(bill)
	pay := serve(`{"status":"paid"}`)

	ctx := context.Background()
	eng := &kernelEngine{Engine: testengine.New(t)}
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{net.New()}, Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	grant := func(name, spec string, when ...string) kernel.GrantSpec {
		t.Helper()
		s, err := k.Grant("net", kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s: %v", spec, err)
		}
		cons, err := k.CompileConstraints("net", when, nil)
		if err != nil {
			t.Fatal(err)
		}
		return kernel.GrantSpec{Kind: "net", Name: name, Scope: s, Constraints: cons}
	}
	grants := []kernel.GrantSpec{
		grant("chat", `{"origin":"`+chat.URL+`","methods":["GET"],"allow_private":true,
		  "responses":{"/channels":{"taint":"chat:service","fields":{"$.channels[*].messages":"chat:messages"}}}}`),
		grant("bills", `{"origin":"`+bills.URL+`","methods":["GET"],"allow_private":true,"responses":{"/bill":{"taint":"bills:bill"}}}`),
		grant("pay", `{"origin":"`+pay.URL+`","methods":["POST"],"paths":["/payments"],"allow_private":true}`,
			`spliced(request.body.recipient) && 'bills:bill' in from(request.body.recipient).integ`,
			`from(request.body.recipient).pattern == r'(?m)^Pay to:\s+([A-Z0-9]+)$'`),
	}
	mod, err := eng.Compile(ctx, guest(t, "net-pattern"))
	if err != nil {
		t.Fatal(err)
	}
	mod = forward.NewModule(mod, eng.funcs, forward.Loopback(guestEngine(t), byDigest))
	task, err := k.Run(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Minute}, Grants: grants})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	raw, _ := task.Result()
	var got map[string]string
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	for attempt, want := range map[string]string{
		"read_name": "ESUCCESS", "name": `"general"`, "pay_payee": "ESUCCESS", "pay_note": "EDENIED",
		"pay_any_iban": "EINVAL", "pay_long": "ELIMIT", "part_none": "EINVAL",
		"read_payee": "ESUCCESS", "payee": `"GB33BUKB20201555555555"`, "pay_forged": "EDENIED",
	} {
		if got[attempt] != want {
			t.Errorf("%s: got %s, want %s", attempt, got[attempt], want)
		}
	}
	if n := len(pay.Requests()); n != 1 {
		t.Errorf("the payment API got %d requests, want 1", n)
	}
	if l := task.Label(); strings.Join(l.Integ(), ",") != "bills:bill,chat:service" {
		t.Errorf("the task ends labelled %v, want bills:bill and chat:service only", l)
	}
}
