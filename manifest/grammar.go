package manifest

// Grammar is the manifest grammar, annotated: the package doc's "Grammar"
// section and "mandate run --help" print this text, and a test checks
// that it names every block and attribute Load accepts.
const Grammar = `task "NAME" {
  module    = "guest"         # required: a .wasm file, or a Go guest directory (relative to the manifest)
  digest    = "sha256:<hex>"  # optional pin: the module must have this digest
  principal = "alice"         # required: on whose behalf the task runs
  entry     = "run"           # optional: the function a reactor module runs
  clearance = ["pii:alice"]   # optional: the most the task may ever hold (confidentiality tags)
  retry     = 1               # optional, 1..5: on a fleet, run again when its node is lost (every
                              # capability must be repeatable: GET/HEAD, reads, charges keyed by the run)

  limits {                    # optional, at most one
    memory  = "64MiB"         # size: B, KiB, MiB, GiB, KB, MB, GB; a plain integer is bytes
    timeout = "30s"           # Go duration
    handles = 256             # capability table size
    output  = "1MiB"          # bytes kept of each of stdout and stderr
    blobs   = "64MiB"         # bytes of blobs the task holds at once
    stored_output = "1MiB"    # bytes the run store keeps of each of the result, stdout and stderr
                              # (default 1MiB; a cut is recorded: truncated, bytes dropped)
    # What the module may contain, checked on its bytes before it is compiled (a module
    # past one is refused, naming it), and what compiling it may use (its time: timeout):
    functions        = 25000    # functions it defines (default 25000)
    locals           = 1000     # locals of one function, parameters included (default 1000)
    nesting          = 2500     # depth of blocks, loops and ifs in one function (default 2500)
    br_table_targets = 5000     # targets of one br_table (default 5000)
    function_size    = "1MiB"   # bytes of one function body (default 1MiB)
    compile_memory   = "1GiB"   # memory compiling the module may use (default 1GiB)
  }

  result {                    # optional, at most one: what the task's answer may carry
    accepts_untrusted = false # refuse a result tainted by any source (EFLOW when the task sets it)
    refuses_taints = ["web:reviews*"] # or refuse only a result carrying a taint these match (a taint,
                              # or a prefix ending in "*"); EFLOW names the taint; others are accepted
  }

  seed "COLLECTION" {         # any number: records imported into the data store before the run
    file      = "data/benefits.json"        # .json or .csv, relative to the manifest
    relations = { manager = "manager_of" }  # optional: FIELD = RELATION edges to derive
  }

  cap "KIND" "NAME" {         # any number; NAME is what the guest passes to cap_lookup
    audit    = true           # kernel-level: write every decision to the audit log first
    rate     = "10/s"         # kernel-level: at most 10 calls a second, for this
                              # capability and everything derived from it (s, m, h, or a duration)
    max_uses = 1              # kernel-level: at most 1 effect, for the whole derivation subtree
    budget   = "100.00"       # kernel-level, kinds with amounts (pay): most spent by the subtree
    when         = "request.method == 'GET'"   # kernel-level: CEL (or a list), every use must satisfy it
    approve_when = "request.method == 'POST'"  # kernel-level: CEL (or a list), a match needs a person's yes
    approve_mints = true      # kernel-level: a call a person approved needs no second yes in this task
    approve_plans = true      # kernel-level: a task may name calls on it in a plan a person approves once (plan_submit)
    ...                       # every other attribute is the kind's grant spec
  }
}
`
