// Package manifest reads Mandate run manifests: HCL files that name the
// module a root task runs, the principal it acts for, its limits, and the
// capabilities it is granted. It also reads policies, the files an MCP
// server serves (see Policies).
//
//	m, err := manifest.Load("quickstart.hcl", map[string]string{"origin": "http://127.0.0.1:8080"})
//	if err != nil {
//		log.Fatal(err) // quickstart.hcl:12,21: ... (one line per problem)
//	}
//	grants, err := m.Grants(k) // k is a *kernel.Kernel with its kinds registered
//	if err != nil {
//		log.Fatal(err) // a kind's refusal, at the line of the offending attribute
//	}
//	t, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: m.Principal, Limits: m.Limits(), Grants: grants})
//
// # Grammar
//
// A manifest holds exactly one task block, the root task (this text is
// also Grammar, which "mandate run --help" prints):
//
//	task "NAME" {
//	  module    = "guest"         # required: a .wasm file, or a Go guest directory (relative to the manifest)
//	  digest    = "sha256:<hex>"  # optional pin: the module must have this digest
//	  principal = "alice"         # required: on whose behalf the task runs
//	  entry     = "run"           # optional: the function a reactor module runs
//	  clearance = ["pii:alice"]   # optional: the most the task may ever hold (confidentiality tags)
//	  retry     = 1               # optional, 1..5: on a fleet, run again when its node is lost (every
//	                              # capability must be repeatable: GET/HEAD, reads, charges keyed by the run)
//
//	  limits {                    # optional, at most one
//	    memory  = "64MiB"         # size: B, KiB, MiB, GiB, KB, MB, GB; a plain integer is bytes
//	    timeout = "30s"           # Go duration
//	    handles = 256             # capability table size
//	    output  = "1MiB"          # bytes kept of each of stdout and stderr
//	    blobs   = "64MiB"         # bytes of blobs the task holds at once
//	    stored_output = "1MiB"    # bytes the run store keeps of each of the result, stdout and stderr
//	                              # (default 1MiB; a cut is recorded: truncated, bytes dropped)
//	    # What the module may contain, checked on its bytes before it is compiled (a module
//	    # past one is refused, naming it), and what compiling it may use (its time: timeout):
//	    functions        = 25000    # functions it defines (default 25000)
//	    locals           = 1000     # locals of one function, parameters included (default 1000)
//	    nesting          = 2500     # depth of blocks, loops and ifs in one function (default 2500)
//	    br_table_targets = 5000     # targets of one br_table (default 5000)
//	    function_size    = "1MiB"   # bytes of one function body (default 1MiB)
//	    compile_memory   = "1GiB"   # memory compiling the module may use (default 1GiB)
//	  }
//
//	  result {                    # optional, at most one: what the task's answer may carry
//	    accepts_untrusted = false # refuse a result tainted by any source (EFLOW when the task sets it)
//	    refuses_taints = ["web:reviews*"] # or refuse only a result carrying a taint these match (a taint,
//	                              # or a prefix ending in "*"); EFLOW names the taint; others are accepted
//	  }
//
//	  seed "COLLECTION" {         # any number: records imported into the data store before the run
//	    file      = "data/benefits.json"        # .json or .csv, relative to the manifest
//	    relations = { manager = "manager_of" }  # optional: FIELD = RELATION edges to derive
//	  }
//
//	  cap "KIND" "NAME" {         # any number; NAME is what the guest passes to cap_lookup
//	    audit    = true           # kernel-level: write every decision to the audit log first
//	    rate     = "10/s"         # kernel-level: at most 10 calls a second, for this
//	                              # capability and everything derived from it (s, m, h, or a duration)
//	    max_uses = 1              # kernel-level: at most 1 effect, for the whole derivation subtree
//	    budget   = "100.00"       # kernel-level, kinds with amounts (pay): most spent by the subtree
//	    when         = "request.method == 'GET'"   # kernel-level: CEL (or a list), every use must satisfy it
//	    approve_when = "request.method == 'POST'"  # kernel-level: CEL (or a list), a match needs a person's yes
//	    approve_mints = true      # kernel-level: a call a person approved needs no second yes in this task
//	    approve_plans = true      # kernel-level: a task may name calls on it in a plan a person approves once (plan_submit)
//	    ...                       # every other attribute is the kind's grant spec
//	  }
//	}
//
// Values are HCL expressions. The only variables are var.NAME, set by the
// caller (mandate run --var NAME=VALUE); there are no functions. A cap block
// holds attributes only; they are evaluated and handed to the kind as one
// JSON object (HCL strings, numbers, bools, lists and objects map to their
// JSON counterparts; null attributes are left out). The attributes when
// and approve_when (a CEL expression, or a list of them, over the kind's
// variables: kindapi.Info.Vars), audit, rate, max_uses and budget are the
// kernel's; label is reserved for the kernel and not supported yet. Uses
// and budget count effects that happened, never refused calls.
//
// # Constraints
//
// Besides its kind's variables (net: request; pay: charge and offer;
// kindapi.Info.Vars), every when and approve_when may read
//
//	uses   the earlier uses of this capability and of every capability derived
//	       from it, newest first: each the variables its call was checked with,
//	       plus u.time (a timestamp) and u.pending (its effect has not ended)
//	now    the time the call is decided (a timestamp)
//	sum    sum(list) or list.sum(): the total of a list of ints or of doubles
//
// so that each of these is one line (on a net capability):
//
//	when = "size(uses) == 0 || request.body.recipient == uses[0].request.body.recipient"  # bind on first use
//	when = "!uses.exists(u, u.request.body.recipient == request.body.recipient)"          # one per recipient
//	when = "uses.all(u, u.request.body.order_id == request.body.order_id)"                # the same id as before
//	when = "sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0"
//	when = "uses.filter(u, u.time > now - duration('1h')).size() < 3"                      # three an hour
//
// A use is a call whose effect ran (or failed after it may have left);
// refused calls are not uses. The kernel keeps the last kernel.MaxHistory
// (64) uses of a capability whose constraints read uses, each at most
// kernel.MaxUseBytes (16 KiB) of variables (a larger call is refused with
// ELIMIT); older uses are forgotten, so a rule that must hold over the
// capability's whole life also sets max_uses. JSON numbers are ints or
// doubles as written (40, 40.5): convert them before sum, as above; a sum
// whose elements' type is unknown does not compile. See kernel/history.go.
//
// Values inside free text, and whether the person gave them:
//
//	urls(s), emails(s), ibans(s)   the URLs (scheme and host lowercased), e-mail
//	                               addresses (lowercased) and IBANs (mod-97 checked,
//	                               without spaces, uppercased) in a string: list(string)
//	given(v)                       v was in the task's input (what the person asked)
//	seen(v, 'pattern')             v was in data the task read whose integrity taint
//	                               matches the pattern ('web:*', 'bank:accounts')
//
// so that a message carries only the links the person gave:
//
//	when = "urls(request.body.text).all(u, given(u))"
//
// A string over 1 MiB, more than 1000 distinct values or one value over
// 4 KiB makes the expression fail: the call is refused, never judged on
// part of its text. given and seen compare the three kinds of value only
// and answer false past the kernel's bounds on what it keeps of a task's
// input and reads (kernel/seen.go); examples/chatsummary uses them.
//
// # Policies
//
// A policy is what "mandate mcp serve POLICY.hcl" offers an MCP client:
// tools, each call of which runs as a fresh task. It is written in the
// same language as a manifest, with the same variables, values and cap
// blocks, but holds exactly one session block and one or more tool blocks
// instead of a task block (this text is also PolicyGrammar, which
// "mandate mcp serve --help" prints):
//
//	session {                     # exactly one
//	  principal = "alice"         # required: on whose behalf every tool acts
//	  clearance = ["pii:alice"]   # optional: the most the session (the client's model) may ever be shown
//	  label_ttl = "24h"           # optional Go duration: a client's label (what its model was shown, kept across
//	                              # its sessions) is dropped when a session starts this long after its last raise;
//	                              # default: kept until "mandate mcp reset CLIENT"
//
//	  limits {                    # optional, at most one: the whole session's
//	    memory  = "64MiB"         # size: B, KiB, MiB, GiB, KB, MB, GB; a plain integer is bytes
//	    timeout = "8h"            # Go duration: the session's lifetime
//	    handles = 256             # capability table size
//	    output  = "1MiB"          # bytes kept of each of stdout and stderr
//	    blobs   = "64MiB"         # bytes of blobs held at once
//	    stored_output = "1MiB"    # bytes the run store keeps of each result and output (default 1MiB)
//	    # Each tool's module, before it is compiled (a tool's own limits take precedence):
//	    functions        = 25000    # functions it defines (default 25000)
//	    locals           = 1000     # locals of one function, parameters included (default 1000)
//	    nesting          = 2500     # depth of blocks, loops and ifs in one function (default 2500)
//	    br_table_targets = 5000     # targets of one br_table (default 5000)
//	    function_size    = "1MiB"   # bytes of one function body (default 1MiB)
//	    compile_memory   = "1GiB"   # memory compiling it may use (default 1GiB)
//	  }
//
//	  seed "COLLECTION" {         # any number: records imported into the data store before the session
//	    file      = "data/benefits.json"        # .json or .csv, relative to the policy
//	    relations = { manager = "manager_of" }  # optional: FIELD = RELATION edges to derive
//	  }
//	}
//
//	tool "NAME" {                 # one or more; NAME is the MCP tool name: 1 to 64 of A-Z a-z 0-9 _ . -
//	  module       = "tools/benefits"  # required: a .wasm file, or a Go guest directory (relative to the policy)
//	  digest       = "sha256:<hex>"    # optional pin: the module must have this digest
//	  entry        = "run"             # optional: the function a reactor module runs
//	  description  = "Your own benefits record"  # required: what the client is shown (never taken from a guest)
//	  input_schema = {                 # optional JSON Schema of the arguments, as an object or a string
//	    type       = "object"          # holding JSON; its type must be "object"; default { type = "object" }
//	    properties = { year = { type = "integer" } }
//	    required   = ["year"]
//	  }
//	  result       = "value"           # optional: "value" (default), or "reference": a mandate://blob reference
//	  responses    = { labels = [] }   # optional: what its results carry in place of what was sent to its sinks
//	                                   # (taint, labels; only with pay caps and net caps without labels or responses)
//	  approval     = "person"          # optional: who answers its approvals: "person" (default: out of band, on
//	                                   # mandate ui's page or with mandate approvals) or "client": the MCP
//	                                   # client's form, whose yes a model-driven client can give itself (never with a pay cap)
//
//	  limits {                    # optional, at most one: each call's, as in the session's limits
//	    memory  = "64MiB"
//	    timeout = "30s"
//	  }
//
//	  cap "KIND" "NAME" {         # any number, as in a task manifest; NAME is what the guest passes to cap_lookup
//	    audit    = true           # kernel-level: write every decision to the audit log first
//	    rate     = "10/s"         # kernel-level: at most 10 calls a second, for this
//	                              # capability and everything derived from it (s, m, h, or a duration)
//	    max_uses = 1              # kernel-level: at most 1 effect, for the whole derivation subtree
//	    budget   = "100.00"       # kernel-level, kinds with amounts (pay): most spent by the subtree
//	    when         = "request.method == 'GET'"   # kernel-level: CEL (or a list), every use must satisfy it
//	    approve_when = "request.method == 'POST'"  # kernel-level: CEL (or a list), a match needs a person's yes
//	    approve_mints = true      # kernel-level: a call a person approved needs no second yes in this task
//	    approve_plans = true      # kernel-level: a task may name calls on it in a plan a person approves once (plan_submit)
//	    ...                       # every other attribute is the kind's grant spec
//	  }
//	}
//
//	tool "NAME" {                 # a tool of an MCP server people already run, instead of a module
//	  upstream    = "read_text_file"   # required: the upstream tool's name; its schema is the definition
//	                                   # the capability pins, and its description too unless given here
//	  description = "Read a report"    # optional; result, approval and limits as above
//	  cap "mcp" "fs" {            # exactly one, of kind mcp: the server (url or command), the tools it
//	    command = ["server-filesystem", "/data/reports"]  # allows and their pinned definitions (caps/mcp)
//	    tools   = ["read_text_file"]
//	    pins    = { read_text_file = "sha256:<hex>" }   # mandate check prints the digests to pin
//	  }
//	}
//
// LoadPolicy reads a policy into a *Policy. A tool's name is what the
// client calls; its description and input schema are what the client is
// shown, and come only from the policy, never from a guest; an upstream
// tool's (Tool.Upstream) come from the upstream definition its mcp
// capability pins by digest, so a server that changes them is refused
// until the operator pins the new text. Every call
// acts for the session's principal, and a tool's cap blocks are checked
// exactly as a task's: kernel attributes, reserved attributes, distinct
// names within the tool. Tool.Grants mints a call's capabilities. Load
// refuses a policy, and LoadPolicy a task manifest, saying which command
// takes it.
//
// # Errors
//
// Every problem is reported with its position, one per line, as
// FILE:LINE,COL: message. Load and LoadPolicy report everything they can
// find at once.
package manifest
