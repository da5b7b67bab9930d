// Package mcp is the mcp capability kind: a capability that is a client
// of one upstream MCP server (a filesystem, code hosting, chat or
// database server people already run), so that every call on it passes
// through the kernel's one mediation pipeline (docs/ARCHITECTURE.md, "the
// mediation pipeline"): lookup, revocation, Prepare, reserve, flow,
// constraints, approval, audit, and only then the call.
//
// # Grant
//
// A cap "mcp" block names exactly one server, by url or by command:
//
//	cap "mcp" "files" {
//	  command = ["npx", "-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "/data"]
//	  env     = ["PATH", "HOME"]
//	  tools   = ["read_text_file", "list_*"]
//	  pins    = {
//	    read_text_file  = "sha256:..."
//	    list_directory  = "sha256:..."
//	  }
//	  results = { "read_*" = { labels = ["pii:alice"], taint = "fs:files" } }
//	  clearance = ["pii:alice"]
//	}
//
//	cap "mcp" "issues" {
//	  url     = "https://mcp.example.com/mcp"
//	  headers = [{ name = "Authorization", env = "ISSUES_TOKEN", prefix = "Bearer " }]
//	  tools   = ["search_issues"]
//	  pins    = { search_issues = "sha256:..." }
//	}
//
// The server:
//
//   - url: a Streamable HTTP endpoint (http or https). Every request goes
//     through the egress guard, as net's and llm's do: no environment
//     proxy, no redirect followed, every address checked; a loopback or
//     private address needs allow_private = true. headers (at most 16)
//     are added by the kernel to every request, each read at grant time
//     from env = "VAR" or file = "PATH" (relative to the manifest), with
//     an optional prefix. A header's value is never in a result (a result
//     echoing it, verbatim, JSON-escaped or base64-encoded in a string, is
//     withheld), an error, a log line or the scope's JSON, which names
//     only where it was read from.
//   - command: a stdio server, started by the kind when a call first
//     needs it, with an EMPTY environment plus exactly the variables env
//     names (their values are read from mandate's own environment at
//     grant time; one that is not set is a grant error naming it), in
//     dir when given. command[0] is resolved to an absolute path in
//     mandate's PATH at grant time. Its stderr goes to mandate's log, a
//     line at a time, cut and bounded. It runs in a process group of its
//     own, which is killed when the kind closes. The command and its
//     arguments are shown (mandate check, the scope's JSON): pass a
//     credential through env, whose values are never shown.
//
// A stdio server runs OUTSIDE the WebAssembly sandbox, as mandate's own
// user, with whatever that user can reach: the capability mediates what
// passes through it (which tools are called, with what, and where their
// results may flow), not what the process does on its own (the files it
// opens, the addresses it dials, what it does with a token env gives it).
// Give it the least you can (a directory, a token of its own), or run it
// elsewhere and reach it by url.
//
// What is mediated: which tools, resources and prompts a task reaches;
// the arguments it sends (constraints, approval, audit, the effects
// list); where the task's data and spliced blobs may go (the clearance);
// what the results carry (labels); how many calls, how large, how long;
// and that a tool's definition is the one the operator read (pins). What
// is not: what the server does with what it is sent, and whether its
// answers are true (they carry its taint until a person or a declassify
// capability says otherwise).
//
// Then:
//
//   - tools (required): the tool names, or patterns with "*" (the only
//     wildcard), that calls may name. A tool the patterns do not allow is
//     refused (EDENIED) in Prepare, before anything is sent.
//   - pins: each allowed tool's definition pinned by digest (see Pins).
//   - results: how results are labelled (see Labels).
//   - clearance: the confidentiality tags the server may be shown: the
//     calling task's label and every blob spliced into a call must flow
//     to it (EFLOW otherwise, and nothing is sent). accepts_untrusted =
//     false and refuses_taints = [...] refuse tainted data, as llm's do.
//   - resources = ["file:///data/*"] and prompts = ["summarise"]: the
//     server's resources (by URI pattern) and prompts (by name or
//     pattern) the capability passes through; none by default. A URI
//     with a dot segment ("." or "..", percent-encoded or not) is never
//     passed through: "*" matches any text, and a server would resolve
//     "file:///data/reports/../private" outside the folder a pattern
//     names.
//   - costs = { expensive_tool = 10 }: a call's amount in calls (1 when
//     no entry names the tool, the most specific entry otherwise), so a
//     budget on the grant (budget = "100") weighs the tools.
//   - timeout (default 2m, at most 30m): the bound of one operation,
//     connecting included; max_request_bytes (default 4 MiB): the
//     arguments with their splices; max_response_bytes (default 4 MiB):
//     a result, which is read with the bound and never buffered whole (a
//     larger one is ELIMIT, the connection is closed, and the next call
//     connects again); max_tools (default 256): how many tools,
//     resources or prompts a list may have.
//
// max_uses, budget, when, approve_when, rate and audit are the kernel's,
// on every grant.
//
// # Per-tool constraints
//
// A capability's constraints apply to every call on it. To constrain
// tools differently, write several cap "mcp" blocks on the same server,
// each naming its tools and carrying its own when, approve_when,
// max_uses or budget:
//
//	cap "mcp" "read"  { command = [...]  tools = ["read_*"]  pins = {...} }
//	cap "mcp" "write" { command = [...]  tools = ["write_file"]  pins = {...}
//	                    approve_when = ["true"]  max_uses = 3 }
//
// Blocks naming the same server (the same url and headers, or the same
// command, env and dir, and the same max_response_bytes) share one
// connection and one process.
//
// # Pins
//
// A tool's definition is what a model reads to decide how to call it: a
// server that changes it after the operator read it can steer the agent.
// So each allowed tool is pinned to the digest of its definition:
// "sha256:" and the hex SHA-256 of the canonical JSON (members sorted at
// every depth, no white space) of the object {name, title, description,
// inputSchema, outputSchema, annotations} as the server listed it, read
// through the Go SDK: a member it left out stays out, and an empty title
// or description, or a readOnlyHint or idempotentHint that is false, reads
// as left out. mandate check prints the digests (Kind.Definitions). A call of a tool that has no pin,
// or whose definition's digest is not its pin, is refused (EDENIED) with
// a message naming the current digest, and nothing is sent to the server
// for that call: the kind lists the server's tools before every call and
// checks the pin against what it lists now. A changed definition stays
// refused until the operator pins it again. The list is also fetched
// again when the server says it changed (notifications/tools/list_changed)
// and on every new connection.
//
// # Operations
//
// Arguments are abi.MCPCallRequest, abi.MCPReadRequest and
// abi.MCPPromptRequest.
//
//   - call {"tool": NAME, "arguments": {...}, "splice": [...],
//     "splice_parts": [...]}: the result blob is the server's
//     CallToolResult, {"content": [...], "structuredContent": {...},
//     "isError": bool}. A tool's own failure (isError) is a result the
//     task reads, not an errno. A string value of the arguments may hold
//     abi.SplicePlaceholder(i), replaced by the text of the i-th spliced
//     blob (a fetch result's body), or be exactly abi.PartPlaceholder(i),
//     replaced by the part's JSON value: the task passes data it never
//     read, and each spliced blob's label must flow to the clearance.
//     Constraints see tool (the name) and args (the arguments, with the
//     splices in; a value spliced from a part carries its provenance at
//     args.PATH for spliced() and from()). Every call is listed with the
//     run's effects ("call TOOL on UPSTREAM" and the arguments as the
//     task wrote them, each splice as "[spliced N]"): a tool may change
//     things, and no capability of this kind is repeatable.
//   - tools {}: the definitions of the allowed tools whose pins match,
//     exactly as pinned, as a JSON array; a tool that is unpinned or
//     changed is left out. Nothing of the task is sent.
//   - resources {} and prompts {}: the server's resources and prompts
//     the capability passes through, as JSON arrays.
//   - read {"uri": URI}: a resource's contents, {"contents": [...]};
//     prompt {"name": NAME, "arguments": {...}}: a prompt,
//     {"description": ..., "messages": [...]}. A URI or name the
//     capability does not pass through is EDENIED before anything is
//     sent; what the task writes into them must flow to the clearance.
//
// Prepare has no side effect: it checks the scope and, when the server's
// tools were listed and have not changed since, the pin. The effect
// connects (starting a stdio server once, and again after it died, at
// most 5 failures in a row), lists the tools, checks the pin, calls, and
// reads the result within the timeout and max_response_bytes. A server
// that sends garbage, nothing, a result past the bound, or dies in the
// middle of a call is an error for that call (EIO, ETIMEDOUT or ELIMIT);
// the next call connects again.
//
// # Labels
//
// Without a results entry, every result carries the integrity taint
// "mcp:" and the server's identity (its url, or "stdio:" and the base
// name of its command) and no confidentiality tags. results maps a tool
// name or pattern to an entry as net's responses take one:
//
//	results = {
//	  "read_*" = {
//	    labels = ["pii:alice"]              # confidentiality of all of it
//	    taint  = "fs:files"                 # instead of mcp:...
//	    fields = { "$.structuredContent.owner" = "fs:owner" }
//	  }
//	  "resource:file:///data/*" = { labels = ["pii:alice"] }
//	  "prompt:summarise"        = { taint = "prompts:reviewed" }
//	}
//
// Field paths name parts of the result blob (kindapi.Result.Parts): a
// task splicing only the owner passes on only fs:owner; one reading the
// blob carries all of them. A server returning structured content also
// writes it as text in its content, so the content carries the entry's
// label joined with every structuredContent field's (unless the entry
// labels $.content itself): a field's value cannot be carried off under
// the entry's label alone through its mirror. The entry naming a tool most specifically
// wins (an exact name over a pattern, then the longest literal prefix).
// A resource read is labelled by the entry "resource:" + its URI names,
// a prompt by "prompt:" + its name; lists carry the default label.
//
// # Narrowing
//
// cap_derive takes tools, resources and prompts (each a subset: a
// pattern narrows only to names or patterns it matches), clearance (only
// lower), accepts_untrusted and refuses_taints (only more refused),
// timeout, max_request_bytes, max_response_bytes and max_tools (only
// lower). pins, results and costs are inherited: a request may repeat
// them, never change them. A request that would widen is EDENIED naming
// what widened.
package mcp
