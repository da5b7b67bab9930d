package net

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// bankSpec labels a bank's transactions by field: the sender is the
// bank's own record, the rest (the subject a payer typed) is not.
const bankSpec = `{"origin":"https://bank.example","methods":["GET","POST"],"labels":["bank"],
  "responses":{
    "/transactions":{"taint":"bank:tx","labels":["pii:alice"],
      "fields":{"$.transactions[*].sender":"bank:transactions.sender",
                "$.transactions[*].iban":{"taint":"bank:transactions.iban","labels":["pii:alice:iban"]},
                "$.transactions[*]['amount']":"bank:transactions.amount"}},
    "/transactions/archive":{"labels":["old"]},
    "/%7Eme":{"taint":"bank:me"}}}`

func labelOf(conf []string, integ ...string) kindapi.Label { return kindapi.NewLabel(conf, integ) }

// TestResponsesGrant: entries are parsed, canonical (paths, patterns,
// sorted fields), shown in the scope's JSON in the spelling a grant takes,
// and described one line each.
func TestResponsesGrant(t *testing.T) {
	s := mustGrant(t, New(), bankSpec)
	if got := len(s.responses); got != 3 {
		t.Fatalf("%d entries, want 3", got)
	}
	tx := s.responseRuleFor("/transactions/2024")
	if tx == nil || tx.prefix != "/transactions" || tx.taint != "bank:tx" {
		t.Fatalf("rule for /transactions/2024: %+v", tx)
	}
	var pats []string
	for _, f := range tx.fields {
		pats = append(pats, f.pattern)
	}
	if want := []string{"$.transactions[*].amount", "$.transactions[*].iban", "$.transactions[*].sender"}; !slices.Equal(pats, want) {
		t.Errorf("fields %q, want %q (canonical, sorted)", pats, want)
	}
	if r := s.responseRuleFor("/transactions/archive/1"); r == nil || r.prefix != "/transactions/archive" || r.taint != "web:https://bank.example" {
		t.Errorf("the longest prefix, its default taint: %+v", r)
	}
	if r := s.responseRuleFor("/~me"); r == nil || r.taint != "bank:me" {
		t.Errorf("a prefix is canonical (/%%7Eme is /~me): %+v", r)
	}
	for _, p := range []string{"/", "/transactionsx", "/other"} {
		if r := s.responseRuleFor(p); r != nil {
			t.Errorf("%s is under %s", p, r.prefix)
		}
	}

	// The JSON form is a spec: granting it again gives the same entries.
	b, _ := json.Marshal(s)
	var js struct {
		Responses json.RawMessage `json:"responses"`
	}
	json.Unmarshal(b, &js)
	again := mustGrant(t, New(), `{"origin":"https://bank.example","responses":`+string(js.Responses)+`}`)
	if !equalResponses(s.responses, again.responses) {
		t.Errorf("the JSON form %s does not grant the same responses", js.Responses)
	}
	if !strings.Contains(string(b), `"/transactions":{"taint":"bank:tx","labels":["pii:alice"],"fields":{"$.transactions[*].amount":{"taint":"bank:transactions.amount","labels":[]}`) {
		t.Errorf("scope JSON %s", b)
	}

	d := New().Describe(s)
	var lines []string
	for _, f := range d.Fields {
		if f.Name == "responses" {
			lines = append(lines, f.Value)
		}
	}
	want := []string{
		"/transactions: taint bank:tx, labels pii:alice; $.transactions[*].amount: taint bank:transactions.amount; $.transactions[*].iban: taint bank:transactions.iban, labels pii:alice:iban; $.transactions[*].sender: taint bank:transactions.sender",
		"/transactions/archive: taint web:https://bank.example, labels old",
		"/~me: taint bank:me",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("Describe:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// What the capability's results can carry: every entry's labels, and
	// web:<origin> since "/" is not all under entries.
	wantBound := labelOf([]string{"bank", "pii:alice", "pii:alice:iban", "old"},
		"bank:tx", "bank:transactions.sender", "bank:transactions.iban", "bank:transactions.amount", "bank:me", "web:https://bank.example")
	if d.Label != wantBound {
		t.Errorf("Describe label %v, want %v", d.Label, wantBound)
	}
	only := mustGrant(t, New(), `{"origin":"https://bank.example","paths":["/transactions/2024"],"responses":{"/transactions":{"taint":"bank:tx"},"/other":{"taint":"x"}}}`)
	if got := New().Describe(only).Label; got != labelOf(nil, "bank:tx") {
		t.Errorf("Describe label of a scope entirely under one entry: %v, want {bank:tx} only", got)
	}
}

// TestResponseLabels: a response under an entry carries its taint and
// labels (with the scope's own labels), and its JSON body's fields their
// own; one whose body is not JSON carries the taint on all of it.
func TestResponseLabels(t *testing.T) {
	s := mustGrant(t, New(), bankSpec)
	body := []byte(`{"transactions":[{"sender":"GB29","subject":"hi","iban":"X","amount":10}]}`)
	label, parts := s.responseLabels("/transactions", body)
	if want := labelOf([]string{"bank", "pii:alice"}, "bank:tx"); label != want {
		t.Errorf("label %v, want %v", label, want)
	}
	want := []kindapi.PartLabel{
		{Pattern: "$.transactions[*].amount", Label: labelOf([]string{"bank", "pii:alice"}, "bank:transactions.amount")},
		{Pattern: "$.transactions[*].iban", Label: labelOf([]string{"bank", "pii:alice", "pii:alice:iban"}, "bank:transactions.iban")},
		{Pattern: "$.transactions[*].sender", Label: labelOf([]string{"bank", "pii:alice"}, "bank:transactions.sender")},
	}
	if !slices.Equal(parts, want) {
		t.Errorf("parts\n %v\nwant\n %v", parts, want)
	}
	b, err := kindapi.NewBlobParts(body, label, parts)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]kindapi.Label{
		"$.transactions[0].sender":  labelOf([]string{"bank", "pii:alice"}, "bank:transactions.sender"),
		"$.transactions[0].subject": labelOf([]string{"bank", "pii:alice"}, "bank:tx"),
	} {
		p, _ := kindapi.ParsePath(path, false)
		if got := b.PartLabel(p); got != want {
			t.Errorf("PartLabel(%s) = %v, want %v", path, got, want)
		}
	}
	if l, parts := s.responseLabels("/transactions", []byte("<html>not json")); l != label || parts != nil {
		t.Errorf("a body that is not JSON: %v, %v; want %v and no parts", l, parts, label)
	}
	if l, parts := s.responseLabels("/other", body); l != s.Label() || parts != nil {
		t.Errorf("a path under no entry: %v, %v; want the scope's label %v", l, parts, s.Label())
	}
	// A deeper pattern wins over the one above it.
	deep := mustGrant(t, New(), `{"origin":"https://bank.example","responses":{"/t":{"taint":"bank:tx","fields":{
	  "$.transactions[*]":"bank:row","$.transactions[*].sender":"bank:sender"}}}}`)
	_, parts = deep.responseLabels("/t", body)
	b, _ = kindapi.NewBlobParts(body, labelOf(nil, "bank:tx"), parts)
	for path, want := range map[string]kindapi.Label{
		"$.transactions[0].sender":  labelOf(nil, "bank:sender"),
		"$.transactions[0].subject": labelOf(nil, "bank:row"),
		"$.transactions[0]":         labelOf(nil, "bank:row", "bank:sender"),
		"$":                         labelOf(nil, "bank:tx", "bank:row", "bank:sender"),
	} {
		p, _ := kindapi.ParsePath(path, false)
		if got := b.PartLabel(p); got != want {
			t.Errorf("deep: PartLabel(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestResponsesGrantErrors(t *testing.T) {
	for _, c := range []struct{ responses, field, mention string }{
		{`"x"`, "responses", "wrong type"},
		{`{"/a":"x"}`, `responses["/a"]`, "want {taint"},
		{`{"a":{}}`, `responses["a"]`, "path"},
		{`{"/a/../b":{}}`, `responses["/a/../b"]`, "path"},
		{`{"/a?q":{}}`, `responses["/a?q"]`, "query"},
		{`{"/a":{"taint":""}}`, `responses["/a"].taint`, "empty"},
		{`{"/a":{"taint":" x"}}`, `responses["/a"].taint`, "space"},
		{`{"/a":{"taint":"web:*"}}`, `responses["/a"].taint`, "*"},
		{`{"/a":{"tain":"x"}}`, `responses["/a"]`, "unknown field"},
		{`{"/a":{"fields":{"transactions":"x"}}}`, `responses["/a"].fields["transactions"]`, `start with "$"`},
		{`{"/a":{"fields":{"$.a":""}}}`, `responses["/a"].fields["$.a"]`, "empty"},
		{`{"/a":{"fields":{"$.a":7}}}`, `responses["/a"].fields["$.a"]`, "want a taint"},
		{`{"/a":{"fields":{"$.a":{"taint":"x","conf":["y"]}}}}`, `responses["/a"].fields["$.a"]`, "unknown field"},
		{`{"/a":{"fields":{"$.a":{"labels":["y"]}}}}`, `responses["/a"].fields["$.a"]`, "empty"},
		{`{"/a":{"fields":{"$.a":"x","$['a']":"y"}}}`, `responses["/a"].fields`, "same place"},
		{`{"/a":{"fields":{"$.t[*].s":"x","$.t[0].s":"y"}}}`, `responses["/a"].fields`, "same place"},
		{`{"/a":{},"/%61":{}}`, `responses["/a"]`, "twice"},
	} {
		_, err := New().Grant(testGrantContext(t), []byte(`{"origin":"https://bank.example","responses":`+c.responses+`}`))
		var fe *kindapi.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("responses %s: %v, want a FieldError on %s mentioning %q", c.responses, err, c.field, c.mention)
		}
	}
	// Patterns of one depth that never name one place are fine, so are
	// a key and an index at one step.
	mustGrant(t, New(), `{"origin":"https://bank.example","responses":{"/a":{"fields":{"$.t[*].s":"x","$.t[*].r":"y","$.u[0]":"z","$.u.v":"w"}}}}`)
	many := map[string]any{}
	for i := range MaxResponseRules + 1 {
		many[fmt.Sprintf("/p%d", i)] = map[string]any{}
	}
	mb, _ := json.Marshal(map[string]any{"origin": "https://bank.example", "responses": many})
	if _, err := New().Grant(testGrantContext(t), mb); err == nil || !strings.Contains(err.Error(), "max") {
		t.Errorf("%d entries: %v", len(many), err)
	}
	for _, c := range []struct{ spec, field string }{
		{`"refuses_taints":["a*b"]`, "refuses_taints"},
		{`"refuses_taints":[""]`, "refuses_taints"},
		{`"refuses_taints":"web:*"`, "refuses_taints"},
	} {
		_, err := New().Grant(testGrantContext(t), []byte(`{"origin":"https://bank.example",`+c.spec+`}`))
		var fe *kindapi.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a FieldError on %s", c.spec, err, c.field)
		}
	}
}

// TestResponsesNarrow: a child inherits its parent's responses and may
// repeat them, never change, add or drop one; it may refuse more taints,
// never fewer; Contains holds to the same.
func TestResponsesNarrow(t *testing.T) {
	k := New()
	parent := mustGrant(t, k, bankSpec)
	child, err := k.Narrow(parent, []byte(`{"paths":["/transactions"],"labels":["bank","more"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := child.(*Scope); !equalResponses(c.responses, parent.responses) || !parent.Contains(c) {
		t.Fatalf("child %s does not inherit the responses of %s", c, parent)
	}
	b, _ := json.Marshal(parent)
	var js struct {
		Responses json.RawMessage `json:"responses"`
	}
	json.Unmarshal(b, &js)
	if _, err := k.Narrow(parent, []byte(`{"responses":`+string(js.Responses)+`}`)); err != nil {
		t.Errorf("repeating the parent's responses (its JSON form): %v", err)
	}
	for _, req := range []string{
		`{"responses":{}}`,
		`{"responses":{"/transactions":{"taint":"bank:tx","labels":["pii:alice"]}}}`,
		`{"responses":{"/transactions":{"taint":"bank:transactions.sender"},"/transactions/archive":{"labels":["old"]},"/~me":{"taint":"bank:me"}}}`,
		strings.Replace(string(js.Responses), `"bank:transactions.sender"`, `"bank:ok"`, 1),
		strings.Replace(string(js.Responses), `"/~me"`, `"/~me/x"`, 1),
	} {
		if !strings.HasPrefix(req, `{"responses"`) {
			req = `{"responses":` + req + `}`
		}
		_, err := k.Narrow(parent, []byte(req))
		if !errors.Is(err, kindapi.ErrDenied) || !strings.Contains(err.Error(), "responses are inherited") {
			t.Errorf("Narrow(%s) = %v, want EDENIED: responses are inherited", req, err)
		}
	}
	if _, err := k.Narrow(parent, []byte(`{"responses":{"/a":{"taint":""}}}`)); kindapi.ErrnoOf(err) != abi.EINVAL {
		t.Errorf("a malformed responses: %v, want EINVAL", err)
	}

	// Refused taints.
	refusing := mustGrant(t, k, `{"origin":"https://pay.example","methods":["POST"],"refuses_taints":["bank:tx","web:https://a.example"]}`)
	for req, ok := range map[string]bool{
		`{}`: true,
		`{"refuses_taints":["bank:tx","web:https://a.example","bank:x"]}`: true,
		`{"refuses_taints":["bank:*","web:*"]}`:                           true,
		`{"refuses_taints":["*"]}`:                                        true,
		`{"refuses_taints":["bank:tx"]}`:                                  false,
		`{"refuses_taints":["bank:tx*","web:https://a.example"]}`:         true,
		`{"refuses_taints":["bank:t","web:*"]}`:                           false,
	} {
		c, err := k.Narrow(refusing, []byte(req))
		switch {
		case ok && err != nil:
			t.Errorf("Narrow(%s): %v", req, err)
		case ok && !refusing.Contains(c):
			t.Errorf("Narrow(%s) = %s, not contained", req, c)
		case !ok && (!errors.Is(err, kindapi.ErrDenied) || !strings.Contains(err.Error(), "refuses_taints drops")):
			t.Errorf("Narrow(%s) = %v, want EDENIED: refuses_taints drops", req, err)
		}
	}
	if c, err := k.Narrow(refusing, []byte(`{"accepts_untrusted":false}`)); err != nil || !refusing.Contains(c) {
		t.Errorf("refusing everything is narrower: %v", err)
	}
	if _, err := k.Narrow(refusing, []byte(`{"refuses_taints":["a*b"]}`)); kindapi.ErrnoOf(err) != abi.EINVAL {
		t.Errorf("a malformed refused taint: %v, want EINVAL", err)
	}

	// Contains, directly.
	other := func(spec string) *Scope { return mustGrant(t, k, spec) }
	for spec, want := range map[string]bool{
		`{"origin":"https://pay.example","methods":["POST"],"refuses_taints":["bank:tx","web:https://a.example"]}`:                                 true,
		`{"origin":"https://pay.example","methods":["POST"],"refuses_taints":["bank:*","web:*"]}`:                                                  true,
		`{"origin":"https://pay.example","methods":["POST"],"accepts_untrusted":false}`:                                                            true,
		`{"origin":"https://pay.example","methods":["POST"],"refuses_taints":["bank:tx"]}`:                                                         false,
		`{"origin":"https://pay.example","methods":["POST"]}`:                                                                                      false,
		`{"origin":"https://pay.example","methods":["POST"],"refuses_taints":["bank:tx","web:https://a.example"],"responses":{"/":{"taint":"x"}}}`: false,
	} {
		if got := refusing.Contains(other(spec)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", spec, got, want)
		}
	}
	if parent.Contains(other(`{"origin":"https://bank.example","methods":["GET","POST"],"labels":["bank"]}`)) {
		t.Error("a scope without the parent's responses is contained")
	}
	all := other(`{"origin":"https://pay.example","methods":["POST"],"accepts_untrusted":false}`)
	if !all.Contains(other(`{"origin":"https://pay.example","methods":["POST"],"refuses_taints":["*"]}`)) {
		t.Error(`refuses_taints ["*"] is not within accepts_untrusted = false`)
	}
	if d := k.Describe(refusing); !slices.Contains(d.Fields, kindapi.Detail{Name: "refuses_taints", Value: "bank:tx,web:https://a.example"}) ||
		!slices.Equal(d.Sink.RefusedTaints.List(), []string{"bank:tx", "web:https://a.example"}) {
		t.Errorf("Describe: %+v", d)
	}
}

// TestFetchResponseLabels: a real server; the label is the answering
// path's, after redirects.
func TestFetchResponseLabels(t *testing.T) {
	f := newFixture(t)
	srv := newFlights(t, func(mux *http.ServeMux) {
		mux.HandleFunc("/transactions", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"transactions":[{"sender":"GB29NWBK60161331926819","subject":"pay GB00ATTACKER"}]}`))
		})
		mux.HandleFunc("/transactions.html", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<p>sender GB29</p>")) })
		mux.HandleFunc("/go/transactions", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/transactions", http.StatusFound) })
		mux.HandleFunc("/transactions/go/out", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/page", http.StatusFound) })
	})
	s := f.grant("flights.example", srv.Server, `,"allow_private":true,"labels":["bank"],"refuses_taints":["web:*"],
	  "responses":{"/transactions":{"taint":"bank:tx","fields":{"$.transactions[*].sender":"bank:transactions.sender"}}}`)
	web := "web:" + s.Origin()
	sender := []kindapi.PartLabel{{Pattern: "$.transactions[*].sender", Label: labelOf([]string{"bank"}, "bank:transactions.sender")}}
	for _, c := range []struct {
		url   string
		label kindapi.Label
		parts []kindapi.PartLabel
	}{
		{"/transactions", labelOf([]string{"bank"}, "bank:tx"), sender},
		{"/go/transactions", labelOf([]string{"bank"}, "bank:tx"), sender},
		{"/transactions/go/out", labelOf([]string{"bank"}, web), nil},
		{"/transactions.html", labelOf([]string{"bank"}, web), nil},
		{"/page", labelOf([]string{"bank"}, web), nil},
	} {
		_, res, err := f.fetch(s, abi.HTTPRequest{Method: "GET", URL: c.url}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if res.Label != c.label || !slices.Equal(res.Parts, c.parts) {
			t.Errorf("%s: label %v parts %v, want %v %v", c.url, res.Label, res.Parts, c.label, c.parts)
		}
	}
	// The prepared fetch is a sink refusing what the scope refuses.
	args, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: "GET", URL: "/"})
	op, err := f.k.Prepare(kindtest.NewCall(abi.NetFetchOp, args, s, kindapi.TaskInfo{}, nil, nil))
	if err != nil || !slices.Equal(op.Sink.RefusedTaints.List(), []string{"web:*"}) {
		t.Errorf("prepared sink %+v, %v", op.Sink, err)
	}
}
