package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

const verifyHelp = `Usage: mandate verify RECEIPT [--key VERIFIER_KEY] [--state-dir DIR]

Checks a receipt written by "mandate run --receipt FILE" offline: its
signature and the audit checkpoint it carries, byte for byte, with the
verifier key (by default the key of STATE_DIR/audit.key, which signed it;
pass --key to check a receipt from elsewhere), then prints in plain words
what the run could and could not do.

It exits 0 when the receipt verifies and 1 when it does not.

Examples:

	mandate run examples/taxprep/taxprep.hcl --input examples/taxprep/w2.json --receipt taxprep.receipt
	mandate verify taxprep.receipt
`

func runVerify(e *env, args []string) int {
	c := lookupCommand("verify")
	fs := flagSet("verify")
	key := fs.String("key", "", "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return e.usageError(c, "want one receipt file")
	}
	signed, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate verify: %v\n", err)
		return exitUsage
	}
	vkey := *key
	if vkey == "" {
		dir, err := e.stateDir(*stateFlag)
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate verify: %v\n", err)
			return exitUsage
		}
		log, err := audit.OpenReadOnly(auditPath(dir))
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate verify: %v (pass --key to verify without a local audit log)\n", err)
			return exitUsage
		}
		vkey = log.VerifierKey()
		log.Close()
	}
	r, err := audit.OpenReceipt(signed, vkey)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate verify: %s does NOT verify: %v\n", pos[0], err)
		return exitTaskFailed
	}
	w := e.stdout
	fmt.Fprintf(w, "receipt %s verifies (key %s)\n", pos[0], strings.SplitN(vkey, "+", 2)[0])
	// A receipt is a file anyone may hand over: every string in it is
	// escaped before it reaches the terminal.
	p := kindapi.Printable
	fmt.Fprintf(w, "run %s: module %s acting for %s\n", p(r.Run), p(r.Module), p(r.Principal))
	fmt.Fprintf(w, "manifest %s (%s)\n\n", p(r.Manifest), p(r.ManifestDigest))
	kinds := map[string]bool{}
	if len(r.Grants) == 0 {
		fmt.Fprintln(w, "The task was granted no capability at all.")
	} else {
		fmt.Fprintln(w, "The task could:")
		for _, g := range r.Grants {
			kinds[g.Kind] = true
			fmt.Fprintf(w, "  - %s\n", p(describeGrant(g)))
		}
	}
	var could []string
	for kind, what := range map[string]string{
		"net":        "reach the network",
		"pay":        "make payments",
		"data":       "read or write stored data",
		"spawn":      "start other tasks",
		"declassify": "lower any label",
		"llm":        "ask a model",
		"mcp":        "call an MCP server",
	} {
		if !kinds[kind] {
			could = append(could, what)
		}
	}
	if len(could) > 0 {
		sort.Strings(could)
		fmt.Fprintf(w, "\nThe task could not %s: it had no capability to.\n", strings.Join(could, ", or "))
	}
	// Every kind that sends something out of the run; a kind this mandate
	// does not know is counted as one.
	out := false
	for kind := range kinds {
		switch kind {
		case "data", "spawn", "declassify":
		default:
			out = true
		}
	}
	if !out {
		fmt.Fprintln(w, "Nothing left the run but its result.")
	}
	fmt.Fprintln(w, "\nTasks as they ended:")
	for _, t := range r.Tasks {
		fmt.Fprintf(w, "  %s %s label=%s clearance=%s\n", p(t.ID), p(string(t.State)), p(compact(t.Label)), p(compact(t.Clearance)))
	}
	return exitOK
}

// describeGrant says in a line what a grant allowed.
func describeGrant(g audit.ReceiptGrant) string {
	var s map[string]any
	_ = json.Unmarshal(g.Scope, &s)
	list := func(k string) string {
		v, _ := s[k].([]any)
		var out []string
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, ", ")
	}
	var d string
	switch g.Kind {
	case "net":
		d = fmt.Sprintf("send %s requests to %v under %s (data cleared to go there: %s)", list("methods"), s["origin"], list("paths"), orPublic(list("clearance")))
	case "data":
		d = fmt.Sprintf("%s fields %s of %v records (%v)", list("ops"), list("fields"), s["collection"], jsonString(s["records"]))
	case "pay":
		d = fmt.Sprintf("charge at most %v per payment to %s (budget %v)", s["max_amount"], list("payees"), orUnlimited(s["budget"]))
	case "spawn":
		d = fmt.Sprintf("start children from %d module(s), at most %v", len(list("modules")), s["max_children"])
	case "declassify":
		d = fmt.Sprintf("drop the labels %s", list("drop"))
	case "llm":
		d = fmt.Sprintf("ask the models %s at %v (data cleared to go there: %s)", list("models"), s["endpoint"], orPublic(list("clearance")))
	case "mcp":
		d = fmt.Sprintf("call the tools %s of the MCP server %v (definitions pinned: %s; data cleared to go there: %s)",
			list("tools"), s["upstream"], jsonString(s["pins"]), orPublic(list("clearance")))
		if r := list("resources"); r != "none" {
			d += "; read its resources " + r
		}
		if pr := list("prompts"); pr != "none" {
			d += "; get its prompts " + pr
		}
	default:
		d = string(g.Scope)
	}
	d = fmt.Sprintf("%s %q: %s", g.Kind, g.Name, d)
	if len(g.When) > 0 {
		d += fmt.Sprintf("; only when %s", strings.Join(g.When, " and "))
	}
	if len(g.ApproveWhen) > 0 {
		d += fmt.Sprintf("; with a person's approval when %s", strings.Join(g.ApproveWhen, " or "))
	}
	if g.Rate != "" {
		d += fmt.Sprintf("; at most %s calls", g.Rate)
	}
	if g.Audited {
		d += " (audited)"
	}
	return d
}

func orPublic(s string) string {
	if s == "none" {
		return "public data only"
	}
	return s
}

func orUnlimited(v any) any {
	if v == nil {
		return "unlimited"
	}
	return v
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }
