package cli

// mandate check: its help and the command, which loads a manifest (or a
// policy, check_policy.go), has its kinds grant the cap blocks
// (check_grants.go), puts their descriptions together (check_report.go) and
// prints the report as text (check_text.go) or JSON.

import (
	"encoding/json"
	"errors"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/manifest"
)

const checkHelp = `Usage: mandate check MANIFEST.hcl|POLICY.hcl [--var NAME=VALUE ...] [--format text|json] [--pins]

Given an MCP policy (mandate mcp serve), it checks each tool as a task of
the session's principal and clearance, and says what a session could come
to be shown (the tags of results returned by value) and which tools it
would then lose (a sink not cleared for them: refused with EFLOW).

Reports, without running anything (no engine, no guest build), what the
manifest's root task could come to hold and where it could send it. Each
capability's kind describes its grant (the static view mandate graph
shows); the report puts the descriptions together:

  task        its principal and its clearance (the manifest's task-level
              clearance, or "unbounded"); with retry, whether a fleet node
              would run it again when its node is lost, or which
              capabilities are not repeatable (a POST, a data write, a
              model call) so that a node refuses the run
  could hold  an upper bound of the confidentiality tags the task could ever
              hold, from every capability that brings data in: what its
              kind finds the grant reaches in the manifest's seed files (a
              data cap: the labels of the granted fields of the records its
              rule reaches, "$owner" being the record's owner; "own": the
              principal's records; {owners=[...]} and {ids=[...]}: those;
              {relation=R}: the owners the seeds' relations make the
              principal R of, or every record of the collection when no
              seed declares R, an over-approximation), or the labels every
              result carries (a net cap's labels). A bounded clearance caps
              it: the kernel refuses anything above it. A capability whose
              data has no seed is "unknown (no seed data)" (bounded by the
              clearance, if any). Records imported into the store otherwise
              (mandate data import) are not seen.
  sinks       every capability that sends data out (a net cap, a pay
              cap...): what it reaches, its clearance, whether it accepts
              data from untrusted sources (and which taints it refuses),
              its grant; which of those tags it
              could receive, and whether holding the others would shut it:
              the kernel refuses a task whose label is above a sink's
              clearance
  result      when the manifest's result block refuses taints (accepts_untrusted
              = false, refuses_taints): each taint the task could read, with
              the capabilities bringing it, accepted or refused; an answer
              written after reading a refused one is refused (EFLOW)
  spawn       every capability that starts child tasks: its grant, modules
              as the manifest names them; children get at most what the
              parent passes them and at most the parent's clearance
  declassify  every capability of a kind that may lower labels: its grant
  other       every other capability: its grant

Each capability's line ends with the kernel's own attributes its cap block
sets, in brackets: [audit] [rate 10/s] [max_uses 1] [budget 100.00 USD]
[when ...] [approve_when ...] [history 64], the last when a constraint
reads uses: the kernel then keeps the capability's last 64 uses for it.
A grant's fields are shown name=value, as mandate graph shows them.

The cap blocks are checked by their kinds, and their constraints compiled,
as mandate run checks and compiles them, but secrets are not read (an
instrument's or header's env variable need not be set) and spawn modules
are not built.

Flags:

	--var NAME=VALUE   sets var.NAME in the manifest; repeatable
	--format FORMAT    text (default) or json
	--pins             instead of the report: for each cap "mcp" block, the
	                   upstream tools its tools allow as the server defines
	                   them now, each with its digest, its pin and whether it
	                   matches ("pinned", "not pinned", "changed": calls of
	                   a tool not pinned or changed are refused), its
	                   definition (what the pin vouches for: read it), and
	                   the pins = { ... } that pins them all. Unlike the
	                   report it reaches out: it starts each stdio server
	                   and connects to each URL, with the grant's secrets,
	                   as mandate run would. Exit 1 when a tool is not
	                   pinned or changed, or a server cannot be listed.

The JSON form is one object; every capability in it has "cap", "kind",
"fields" (the grant's limits as its kind describes them, in readable units)
and "kernel" (the kernel's attributes that are set):

	{"task": {"name": "trip-planner", "principal": "alice",
	          "bounded": false, "clearance": []},
	 "could_hold": ["pii:alice"],
	 "unknown": false,            // some source has no seed data and the
	                              // task is unbounded: could_hold is incomplete
	 "sources": [{"cap": "itinerary", "kind": "data",
	              "fields": [{"name": "collection", "value": "itinerary"}, ...],
	              "kernel": {},
	              "summary": "collection itinerary, records own, fields from, passport",
	              "tags": ["pii:alice"],
	              "labelled_fields": {"passport": ["pii:alice"]},
	              "above_clearance": [], "unknown": false,
	              "note": "1 seeded record(s) reachable"}],
	 "sinks": [{"cap": "airline", "kind": "net",
	            "fields": [{"name": "origin", "value": "https://..."}, ...],
	            "kernel": {"audit": true, "rate": "10/s", "max_uses": 1,
	                       "budget": "100.00 USD", "when": ["..."],
	                       "approve_when": ["..."], "history": 64},
	            "reaches": ["https://.../"], "clearance": ["pii:alice"],
	            "accepts_untrusted": true, "refuses_taints": ["web:*"],
	            "could_receive": ["pii:alice"],
	            "blocked_by": [], "safe": true, "verdict": "safe: ..."}],
	 "spawn": [{"cap": "children", "kind": "spawn",
	            "fields": [{"name": "modules", "value": "finder.wasm"}, ...],
	            "kernel": {}, "note": "..."}],
	 "declassify": [{"cap": "nationality", "kind": "declassify",
	                 "fields": [{"name": "drop", "value": "pii:alice"}, ...],
	                 "kernel": {}}],
	 "other": [],
	 "result": {"accepts_untrusted": true, "refuses_taints": ["web:reviews*"],
	            "could_carry": [{"taint": "web:reviews.example",
	                             "from": ["reviews"], "refused": true}, ...],
	            "refused": ["reviews"], "verdict": "..."}}  // only with a result block

A declassify cap lowers the labels of blobs the task hands on, never the
task's own label, so it changes none of the verdicts; it is listed last.

Exit codes:

	0    the manifest loads (whatever the report says)
	1    with --pins: an upstream tool is not pinned or was changed, or a
	     server's tools could not be listed
	2    usage or manifest error (FILE:LINE,COL: message), or a seed file
	     that cannot be read

Examples:

	mandate check planner.hcl --var flights=https://flights.example ...
	mandate check hr.hcl --format json | jq .could_hold
	mandate check desk.hcl --pins
`

func runCheck(e *env, args []string) int {
	c := lookupCommand("check")
	fs := flagSet("check")
	vars := varFlag{}
	fs.Var(vars, "var", "")
	format := fs.String("format", "text", "")
	pins := fs.Bool("pins", false, "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	file, code, ok := e.oneArg(c, pos, "the manifest")
	if !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		return e.usageError(c, "unknown format %q (formats: text, json)", *format)
	}
	m, err := manifest.Load(file, vars)
	if err != nil {
		var me *manifest.Error
		if errors.As(err, &me) && me.Policy {
			// A policy: its own problems (a variable not set, say), not
			// the task manifest's "this is a policy".
			p, perr := manifest.LoadPolicy(file, vars)
			if perr != nil {
				return e.manifestError(perr)
			}
			if *pins {
				var sets []mcpCaps
				for _, t := range p.Tools {
					sets = append(sets, mcpCaps{name: t.Name, caps: t.Caps, dir: p.Dir})
				}
				return e.checkPins(sets, *format)
			}
			return e.checkPolicy(p, *format)
		}
		return e.manifestError(err)
	}
	if *pins {
		return e.checkPins([]mcpCaps{{caps: m.Caps, dir: m.Dir}}, *format)
	}
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	g, err := checkGrants(m, ks, host.Declassifiers())
	if err != nil {
		return e.manifestError(err)
	}
	r, err := checkManifest(m, g)
	if err != nil {
		return e.manifestError(err)
	}
	if *format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		return exitOK
	}
	writeCheckText(e.stdout, m, r)
	return exitOK
}
