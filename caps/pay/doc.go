// Package pay is the payment capability kind, Kind("pay"): a payment token
// that carries the person's intent. It allows charges to some payees, in
// one currency, each at most an amount, until an expiry, with a person's
// approval above a threshold; within a budget and a number of uses shared
// with everything derived from it, which are the kernel's (budget and
// max_uses on a grant; kernel/allowance.go), read in this kind's unit. The card or account (the
// instrument) never enters the guest: the kernel holds it and calls the
// payment provider itself.
//
// A manifest grants one:
//
//	cap "pay" "card" {
//	  provider      = "https://pay.example/v1"
//	  instrument    = { env = "CARD_TOKEN" }
//	  payees        = ["airline.example"]
//	  currency      = "USD"
//	  max_amount    = "800 USD"
//	  budget        = "1000 USD"
//	  max_uses      = 3
//	  expires       = "24h"
//	  approve_above = "500 USD"
//	}
//
// budget and max_uses are the kernel's attributes (they bound every kind's
// grant the same way); the rest reaches Grant as the JSON spec
//
//	{"provider":"https://pay.example/v1","instrument":{"env":"CARD_TOKEN"},
//	 "payees":["airline.example"],"currency":"USD","max_amount":"800 USD",
//	 "expires":"24h","approve_above":"500 USD"}
//
// A guest charges it:
//
//	card, _ := mandate.Lookup("card")
//	blob, err := card.Call("charge", []byte(`{"payee":"airline.example",
//	    "amount":"612.00","currency":"USD","idempotency_key":"trip-42",
//	    "description":"LIS-JFK 2026-12-01","offer":{"duration_hours":9,"stops":0}}`))
//	receipt, _ := blob.Bytes()
//	// {"charge_id":"ch_1","amount":"612.00","currency":"USD",
//	//  "payee":"airline.example","idempotency_key":"trip-42","status":"succeeded"}
//
// and narrows it before handing it to a child (cap_derive):
//
//	{"budget":"100","max_uses":1,"approve_above":"50","expires":"1h"}
//
// (the kernel takes budget and max_uses out of the request and checks them
// against every ancestor's: a child asking for more is EDENIED). In Go:
//
//	k := pay.New()
//	root, err := k.Grant(kindapi.GrantContext{Dir: manifestDir}, spec)
//	child, err := k.Narrow(root, []byte(`{"max_amount":"100"}`))
//	_, err = k.Narrow(child, []byte(`{"max_amount":"200"}`)) // EDENIED: max_amount 200.00 exceeds 100.00
//
// # Grant spec
//
//	field          type      default     meaning
//	provider       string    (required)  provider base URL, http or https; charges go to <provider>/charges
//	allow_private  bool      false       the provider may be on loopback/private addresses
//	instrument     object    (required)  {"env": VAR} or {"file": PATH}: the card or account token
//	timeout        duration  "30s"       one provider call (<= 5m)
//	payees         []string  (required)  allowed payees, exact match, case-insensitive (<= 64)
//	currency       string    (required)  one ISO 4217 code, e.g. "USD"
//	max_amount     amount    unlimited   largest single charge
//	expires        time      never       RFC 3339 time, or a duration from grant time ("24h")
//	approve_above  amount    never       a charge above it needs the approver's yes
//	clearance      []string  []          confidentiality tags a charge may carry to the provider
//	accepts_untrusted bool   true        false: refuse a charge by a task tainted by any source (EFLOW)
//	refuses_taints []string  []          refuse a charge by a task carrying one of these taints, or a
//	                                     prefix ending in "*" ("web:*"); EFLOW names the taint
//
// An amount is a string "800", "800.00" or "800.00 USD" (the currency, when
// written, must be the capability's), or a JSON number with at most two
// decimals. Amounts are held as integer minor units (hundredths; every
// currency is treated as having two decimals); more decimals, signs,
// exponents, NaN and Inf are refused, and amounts are at most MaxMinor.
// Payees are 1..253 letters, digits, '.', '-', '_' or ':', lower-cased.
// The instrument is read at grant: from the host environment, or from a
// file relative to the manifest (one trailing newline removed). It never
// appears in the scope's JSON (which names only its source, e.g.
// "env:CARD_TOKEN"), in errors, in logs, or in anything the guest gets.
// Without allow_private, a provider that is a loopback or private IP literal
// or a name under "localhost" is refused at grant, and a provider name that
// resolves to such an address is refused when dialed. Errors are
// *kindapi.FieldError naming the field.
//
// # Charge
//
// The only operation is "charge". Its arguments are a JSON object:
//
//	{"payee":"airline.example","amount":"612.00","currency":"USD",
//	 "idempotency_key":"k1","description":"...","offer":{...}}
//
// payee, amount and currency are required. idempotency_key (1..255
// printable ASCII bytes) is optional; without one the kernel makes up a
// unique key, so a retry is a new charge. description is at most 1024
// bytes. offer is a free-form JSON object (at most 16 KiB) describing what
// is bought; it is sent to the provider as "details", shown to the
// approver, and is what a capability's `when` constraints refer to, e.g.
// offer.duration_hours <= 12 && offer.stops <= 1. Unknown fields are EINVAL
// (a guest cannot name an instrument or a provider).
//
// Prepare makes checks 1 to 6 (no side effect); the kernel's pipeline
// (docs/ARCHITECTURE.md) then reserves, checks the flow and constraints,
// asks for approval and audits before the effect (9). The checks, in order,
// and their errno:
//
//  1. decode: malformed JSON, unknown fields, a missing field, a bad amount
//     (zero, negative, more than two decimals, exponent), payee, currency or
//     key, an offer that is not an object: EINVAL; an offer or description
//     over its bound: ELIMIT.
//  2. expiry: at or after expires: EEXPIRED.
//  3. payee not in payees: EDENIED.
//  4. currency not the capability's: EDENIED.
//  5. amount over max_amount: EDENIED.
//  6. idempotency: a key already used anywhere in the capability's tree
//     (the root grant and everything derived from it) returns that
//     charge's receipt again without charging, and spends no use and no
//     budget; the same key with a different payee, amount or currency is
//     EDENIED.
//  7. reserve (the kernel's step): the key is claimed (a call that finds
//     it in flight spends nothing and waits to replay its receipt, so
//     concurrent calls with one key make one provider charge); the amount
//     and one use are reserved on every budget and max_uses of the
//     capability's chain, atomically; if any lacks room: ELIMIT, and
//     nothing is reserved.
//  8. approval: a charge above approve_above needs the approver's yes; the
//     person is shown "charge 612.00 USD to airline.example" with payee,
//     amount, currency, provider, key, description and offer; no (or no
//     approver): EAPPROVAL.
//  9. provider: POST <provider>/charges. A non-2xx answer, a status other
//     than "succeeded", or a network failure is EIO; no answer within the
//     timeout is ETIMEDOUT.
//
// A refusal after step 7 releases the reservation and gives the key up, so
// a denied charge leaves no debit and nothing at the provider; a retry with
// the same key may charge. A charge the provider refused (non-2xx) gives
// its budget and use back. On a timeout or a network failure the
// provider's outcome is unknown: the amount stays debited (the charge may
// have happened), the key is given up, and a retry with the same
// idempotency key lets the provider answer with the original charge rather
// than make a second one.
//
// A successful charge returns a blob holding the receipt (Receipt):
//
//	{"charge_id":"ch_1","amount":"612.00","currency":"USD",
//	 "payee":"airline.example","idempotency_key":"k1","status":"succeeded"}
//
// # Provider API
//
// The kernel calls the provider with a plain HTTP client (no environment
// proxy, no cookies, redirects refused):
//
//	POST {provider}/charges
//	Content-Type: application/json
//	Idempotency-Key: mandate-<tree id>-<key>
//
//	{"amount_minor":61200,"currency":"USD","payee":"airline.example",
//	 "instrument":"tok_...","idempotency_key":"mandate-<tree id>-<key>",
//	 "description":"...","details":{...}}
//
// The idempotency key is the guest's key prefixed with a random id of the
// capability tree, so two grants using the same key never collide at the
// provider. The provider answers 2xx (201 for a new charge, 200 for a
// replayed key) with
//
//	{"id":"ch_1","status":"succeeded"}
//
// and anything else (a non-2xx status with a JSON error body) as a
// failure. The provider's error bodies are never shown to the guest (they
// could echo the instrument); a charge id or status containing the
// instrument is refused. Package paytest is a loopback provider that
// implements this API for tests and examples.
//
// # Narrowing request
//
// Every field is optional; absent keeps the parent's value:
//
//	{"payees":[...], "currency":"USD", "max_amount":"100",
//	 "expires":"1h", "approve_above":"50"}
//
// (and the kernel's "budget" and "max_uses"). The result must be within
// the parent: payees a subset, the same currency, max_amount no larger,
// expires no later (a duration
// counts from the derivation), approve_above no higher (asking for more
// approvals is narrower; a parent without one lets the child add one). A
// limit the parent lacks may be added. provider, instrument, timeout and
// allow_private cannot be changed (naming them is EINVAL). A request that
// widens anything is EDENIED naming every field that widened, never
// clamped; a malformed one is EINVAL.
//
// What a child charges is debited by the kernel on the child's budget and
// on every ancestor's, so a child's spending is at most its own budget and
// at most what is left of each ancestor's, and ten children racing cannot
// together spend more than the root's budget. Scope.Contains is exact:
// besides the limits, the other scope must share the receiver's
// idempotency keys (be of the same grant's tree).
package pay
