// Command widen-derive asks every kind for more than it holds when
// deriving: net (paths, methods, origin, sizes, timeout, redirects,
// private addresses, a header it was not given), pay (budget, payees,
// per-charge maximum, uses, approval threshold, currency), data (fields,
// ops, collection, records), spawn (modules, depth, children, memory),
// declassify (drops, projections), the test kind (level), and re-widening
// a narrowed capability. Law 3: EDENIED (never clamped), audited.
package main

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	try := func(k, cap, req string) {
		c := attack.Must(mandate.Lookup(cap))
		_, err := c.Derive(req)
		attack.Rec(k, err)
	}
	try("net_paths", "web", `{"paths":["/"]}`)
	try("net_paths_sibling", "web", `{"paths":["/apix"]}`)
	try("net_methods", "web", `{"methods":["GET","DELETE"]}`)
	try("net_origin", "web", `{"origin":"`+in.Evil+`"}`)
	try("net_request_bytes", "web", `{"max_request_bytes":"2MiB"}`)
	try("net_response_bytes", "web", `{"max_response_bytes":"64MiB"}`)
	try("net_timeout", "web", `{"timeout":"1h"}`)
	try("net_redirects", "web", `{"max_redirects":10}`)
	try("net_clearance", "web", `{"clearance":["pii:alice"]}`)
	try("pay_budget", "card", `{"budget":"251"}`)
	try("pay_payees", "card", `{"payees":["airline.example","evil.example"]}`)
	try("pay_max", "card", `{"max_amount":"101"}`)
	try("pay_uses", "card", `{"max_uses":11}`)
	try("pay_approval", "card", `{"approve_above":"81"}`)
	try("pay_currency", "card", `{"currency":"EUR"}`)
	try("data_fields", "mydata", `{"fields":["plan","dental"]}`)
	try("data_all_fields", "mydata", `{"fields":["*"]}`)
	try("data_ops", "mydata", `{"ops":["read","write"]}`)
	try("data_collection", "mydata", `{"collection":"people"}`)
	try("data_records", "mydata", `{"records":{"relation":"manager_of"}}`)
	try("spawn_modules", "spawner", `{"modules":["sha256:`+zeros()+`"]}`)
	try("spawn_depth", "spawner", `{"max_depth":3}`)
	try("spawn_children", "spawner", `{"max_children":5}`)
	try("spawn_memory", "spawner", `{"max_memory":"128MiB"}`)
	try("declass_drop", "declass", `{"drop":["pii:bob"]}`)
	try("declass_project", "declass", `{"project":["fields.passport"]}`)
	try("test_level", "test", `{"level":6}`)
	// Narrow, then ask for the old scope back from the narrowed one.
	web := attack.Must(mandate.Lookup("web"))
	n := attack.Must(web.Derive(`{"paths":["/api/narrow"],"methods":["GET"]}`))
	_, err := n.Derive(`{"paths":["/api"]}`)
	attack.Rec("rewiden_paths", err)
	_, err = n.Derive(`{"methods":["POST"]}`)
	attack.Rec("rewiden_methods", err)
	card := attack.Must(mandate.Lookup("card"))
	cn := attack.Must(card.Derive(`{"budget":"10","max_uses":1}`))
	_, err = cn.Derive(`{"budget":"20"}`)
	attack.Rec("rewiden_budget", err)
	// A narrowing is checked by the kernel too: a legal one works.
	_, err = web.Derive(`{"paths":["/api/ok"]}`)
	attack.Rec("legal", err)
	attack.Finish()
}

func zeros() string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}
