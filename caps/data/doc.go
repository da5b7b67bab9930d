// Package data is the data capability kind, Kind("data"): the right to
// read, query or write a slice of a person's records: one collection, some
// records chosen by a rule about the calling task's principal, some
// fields, some operations.
//
// # Store
//
// Records live in an embedded SQLite database (modernc.org/sqlite, pure
// Go; no server), opened with Open: WAL journal, a busy timeout, the
// schema versioned by PRAGMA user_version and marked by PRAGMA
// application_id, so that a corrupted file or another program's database
// is a clear error. A record has a collection, an id (unique within the
// collection), an owner (a principal id), fields (JSON values by name) and
// per-field confidentiality labels, e.g. "passport" labelled
// ["pii:alice"]. Store.Import stores many records in one transaction
// (any bad record: nothing is stored; the error names its index); a record
// whose id is already in the collection is replaced.
//
// Relations between principals (for rules such as manager_of) are edges
// (subject, relation, object) in a relations table: "carol manager_of
// alice". They are derived from a collection when it is imported with
// ImportOptions.Relations (the CLI's --relation FIELD=RELATION): each
// record whose field F is a principal id S (or a list of them) adds the
// edge (S, RELATION, record owner). Importing a "people" collection whose
// records have a "manager" field with --relation manager=manager_of makes
// each manager manager_of their reports. Store.AddRelations adds edges
// directly. Relation names are free strings.
//
// # Backends
//
// The kind reads and writes through the Backend interface. Store (the
// embedded SQLite file above) is the default; a fleet of nodes shares a
// PostgreSQL database through caps/data/pgstore, named by a postgres://
// URL wherever a store's path goes: $MANDATE_DATA_STORE,
// host.Options.DataStore, mandate data --store. The URL's password is never
// printed (keep it in PGPASSWORD or PGPASSFILE). Both validate with the same
// code (PlanImport, CheckRelations), sort ids bytewise, keep an update's
// read-modify-write atomic (SQLite: one writer at a time; PostgreSQL: the
// record locked with SELECT ... FOR UPDATE, a transaction that fails on a
// serialization failure or deadlock retried a bounded number of times), and
// pass one conformance suite, caps/data/datatest.
//
// # Import files
//
// mandate data import FILE.json|FILE.csv --collection NAME reads:
//
//	JSON: [{"id":"b1","owner":"alice","fields":{"plan":"gold","passport":"X1"},
//	        "labels":{"passport":["pii:$owner"]}}, ...]
//
//	CSV:  id,owner,plan,passport[pii:$owner]
//	      b1,alice,gold,X1
//
// In CSV, a header "name[tag,tag]" labels the column's field (tags
// separated by commas or spaces; quote the header cell when it has a
// comma); values are JSON strings; an empty cell leaves the field out. In
// both, "$owner" in a label stands for the record's owner.
//
// # Grant spec
//
//	cap "data" "benefits" {
//	  collection = "benefits"
//	  records    = "own"
//	  fields     = ["plan", "dental"]
//	  ops        = ["read", "query"]
//	}
//
//	field       type      default     meaning
//	collection  string    (required)  the collection
//	records     rule      (required)  which records, below
//	fields      []string  (required)  the fields of the slice; ["*"] (alone) for every field
//	ops         []string  ["read"]    of read, query, write
//
//	records rule             a record is allowed when
//	"own"                    its owner is the calling task's principal
//	{"relation":"manager_of"}  the principal is manager_of its owner (a relations edge)
//	{"owners":["alice"]}     its owner is listed
//	{"ids":["b1","b2"]}      its id is listed
//
// Rules are resolved at use against the calling task's principal
// (kindapi.Call.Task.Principal): the same manifest and module run for Alice
// reads Alice's record and run for Bob reads Bob's. A task with no
// principal matches no "own" or relation rule. Every field is granted
// only by writing ["*"]: there is no implicit "all".
//
// # Narrowing request
//
//	{"records": RULE, "fields": [...], "ops": [...], "collection": "benefits"}
//
// Every key is optional; absent keeps the parent's. fields and ops must be
// subsets (["*"] only under ["*"]); collection must be the parent's. A
// records rule adds to the chain of rules the parent carries, and a record
// must satisfy every rule of the chain: "own" or a relation narrowed to
// {"owners":[...]} or {"ids":[...]} allows only the records both allow
// (checked at use). An owners (ids) list under an owners (ids) list must
// be a subset of it; "own" and relation rules can only be restated, never
// introduced (that would be a different set, not a subset). Anything that
// widens is EDENIED naming what widened (never clamped); a malformed
// request is EINVAL; more than MaxRules rules is ELIMIT.
//
// # Operations
//
//	read   {"id":"b1"} or {"owner":"alice"}, optional "fields":[...]
//	       -> {"id","owner","fields":{...}}
//	query  {"where":{"plan":"gold"},"limit":N,"fields":[...]}   (limit 1..1000, default 100)
//	       -> {"records":[{"id","owner","fields"},...],"truncated":bool}
//	write  {"id":"b1","fields":{"plan":"silver"}} -> no result
//
// Results carry only the slice's fields (or those asked for) and are
// labelled with the union of the returned fields' confidentiality tags
// and the integrity taint "data:<collection>"; a query's result also
// carries the labels of its where fields in every record it examined
// (whether a record matches, and even an empty result, says something
// about them). read by owner returns that
// owner's first allowed record (by id); query returns the allowed records
// whose fields equal every "where" value (compared as canonical JSON),
// sorted by id.
//
// Errors: an op not in the scope, a field outside the slice (asked for,
// in a where condition, which would otherwise be an oracle on its value,
// or written) is EDENIED. A record outside the scope and a record that
// does not exist give the same EDENIED error with the same text, so a
// task cannot learn whether another person's record exists. Malformed
// arguments are EINVAL. A write updates existing fields only (creating a
// field would need a label for it; EDENIED), in one transaction that
// re-checks the record's scope; a denied write changes nothing. A field is
// a sink cleared for its own labels: the written value carries the writing
// task's label, which must flow into every field written (EFLOW otherwise),
// so a task that read the passport cannot copy it into an unlabelled field
// for a clean task to read back. The field keeps its labels. The store
// keeps no integrity labels: a task tainted by a web page may still write
// an unlabelled field it is granted.
package data
