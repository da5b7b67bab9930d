package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

const verifyHelp = `Usage: mandate verify RECEIPT [--key VERIFIER_KEY] [--state-dir DIR] [--source DIR]

Checks a receipt written by "mandate run --receipt FILE" offline: its
signature and the audit checkpoint it carries, byte for byte, with the
verifier key (by default the key of STATE_DIR/audit.key, which signed it;
pass --key to check a receipt from elsewhere), then prints in plain words
what the run could and could not do, and how its module was built when the
module carries a build record (a module "mandate build" wrote).

RECEIPT is either form "mandate run --receipt-format" writes: a signed note
(the default) or an in-toto bundle of DSSE envelopes (dsse): the run's
statement and, for a module with a build record, its SLSA provenance, which
must name the receipt's module and say what its build record says.

With --source DIR, the module is rebuilt from DIR as its build record says
(the language and mode it names, with this machine's toolchains and the
builder's own flags, never flags read from the receipt), and verify says
whether DIR builds the module the receipt names. When it does not, it
names what differs: each source file changed, added or missing, a
toolchain, SDK or flags that differ. A rebuild whose code is the module's
but whose record differs only in the checkout's revision (a copy of the
source outside git) counts as the module, and says so.

It exits 0 when the receipt verifies (and DIR builds its module) and 1 when
it does not.

Flags:

	--key KEY         the verifier key (NAME+HASH+BASE64, as "mandate audit
	                  key" prints it)
	--source DIR      rebuild the module from DIR and compare
	--state-dir DIR   where STATE_DIR/audit.key is (default as mandate run)

Examples:

	mandate run examples/taxprep/taxprep.hcl --input examples/taxprep/w2.json --receipt taxprep.receipt
	mandate verify taxprep.receipt --source examples/taxprep/tool
`

func runVerify(e *env, args []string) int {
	c := lookupCommand("verify")
	fs := flagSet("verify")
	key := fs.String("key", "", "")
	source := fs.String("source", "", "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return e.usageError(c, "want one receipt file")
	}
	signed, err := readBounded(pos[0], maxReceipt)
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
	v, err := openAnyReceipt(signed, vkey)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate verify: %s does NOT verify: %v\n", pos[0], err)
		return exitTaskFailed
	}
	w := e.stdout
	// A receipt is a file anyone may hand over: every string in it is
	// escaped before it reaches the terminal.
	p := kindapi.Printable
	if v.receipt == nil {
		fmt.Fprintf(w, "provenance %s verifies (%s, key %s)\n", pos[0], v.form, strings.SplitN(vkey, "+", 2)[0])
		fmt.Fprintf(w, "module %s was built by mandate build: %s\n", p(v.module), p(describeRecord(*v.build)))
		if *source == "" {
			return exitOK
		}
		return e.verifySource(v.module, v.build, *source, "the provenance")
	}
	r := *v.receipt
	fmt.Fprintf(w, "receipt %s verifies (%s, key %s)\n", pos[0], v.form, strings.SplitN(vkey, "+", 2)[0])
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
	if v.build != nil {
		fmt.Fprintf(w, "\nThe module was built by mandate build: %s\n", p(describeRecord(*v.build)))
	} else {
		fmt.Fprintln(w, "\nThe module carries no build record (it was not built by mandate build, or the receipt is older than version 2).")
	}
	if *source == "" {
		return exitOK
	}
	return e.verifySource(r.Module, v.build, *source, "the receipt")
}

// maxReceipt bounds a file mandate verify reads: a receipt anyone may
// hand over is read whole, so not past this.
const maxReceipt = 64 << 20

// readBounded reads the file at path, refusing one of more than max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than %d MiB: not a receipt", path, max>>20)
	}
	return b, nil
}

// verified is what a verified file says: a run's receipt, the build
// record of its module, or both.
type verified struct {
	form    string
	receipt *audit.Receipt     // nil for a provenance alone
	module  string             // the module's digest
	build   *guestbuild.Record // nil when the module carries none
}

// openAnyReceipt opens what mandate writes for a person to check: a
// receipt as a signed note (its JSON, then a signature line), or an
// in-toto bundle of DSSE envelopes (JSON objects with a payloadType): a
// run's statement, its module's provenance, or both (mandate build
// --provenance writes the provenance alone).
func openAnyReceipt(b []byte, vkey string) (verified, error) {
	var first map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&first) != nil || first["payloadType"] == nil {
		r, err := audit.OpenReceipt(b, vkey)
		if err != nil {
			return verified{}, err
		}
		v := verified{form: "signed note, version " + fmt.Sprint(r.Version), receipt: &r, module: r.Module}
		if len(r.Build) > 0 {
			rec, err := guestbuild.ParseRecord(r.Build)
			if err != nil {
				return verified{}, fmt.Errorf("the module's build record: %w", err)
			}
			v.build = &rec
		}
		return v, nil
	}
	envs, err := audit.ReadEnvelopes(b)
	if err != nil {
		return verified{}, err
	}
	var (
		v     verified
		provs []*intoto.Statement
	)
	for i, env := range envs {
		st, err := audit.OpenEnvelope(env, vkey)
		if err != nil {
			return verified{}, fmt.Errorf("envelope %d: %w", i+1, err)
		}
		switch st.GetPredicateType() {
		case audit.RunPredicateType:
			if v.receipt != nil {
				return verified{}, fmt.Errorf("envelope %d: a second run statement", i+1)
			}
			r, err := audit.ReceiptFromStatement(st, vkey)
			if err != nil {
				return verified{}, fmt.Errorf("envelope %d: %w", i+1, err)
			}
			v.receipt = &r
		case host.ProvenancePredicateType:
			provs = append(provs, st)
		default:
			// Signed by the key, but not a statement this mandate
			// writes: refused rather than passed over in silence.
			return verified{}, fmt.Errorf("envelope %d: predicate type %q is not one mandate writes", i+1, kindapi.Printable(st.GetPredicateType()))
		}
	}
	if len(provs) > 1 {
		return verified{}, errors.New("more than one provenance statement")
	}
	if v.receipt == nil {
		if len(provs) == 0 {
			return verified{}, errors.New("no statement")
		}
		module, rec, err := host.ProvenanceRecord(provs[0])
		if err != nil {
			return verified{}, err
		}
		return verified{form: "SLSA provenance in a DSSE envelope", module: module, build: &rec}, nil
	}
	r := *v.receipt
	v.module = r.Module
	v.form = fmt.Sprintf("in-toto statement in a DSSE envelope, receipt version %d", r.Version)
	if len(r.Build) > 0 {
		rec, err := guestbuild.ParseRecord(r.Build)
		if err != nil {
			return verified{}, fmt.Errorf("the module's build record: %w", err)
		}
		v.build = &rec
	}
	switch {
	case len(provs) == 1 && v.build == nil:
		return verified{}, errors.New("a provenance statement, but the receipt has no build record")
	case len(provs) == 1:
		// The provenance restates the module's build record: it must
		// name the receipt's module and say what the record says.
		want, err := host.ProvenanceStatement("module", r.Module, *v.build)
		if err != nil {
			return verified{}, err
		}
		if !host.SameProvenance(provs[0], want) {
			return verified{}, errors.New("the SLSA provenance does not say what the receipt's build record says, or names another module")
		}
		v.form += ", with its module's SLSA provenance"
	case v.build != nil:
		return verified{}, errors.New("the receipt has a build record but the bundle no provenance statement")
	}
	return v, nil
}

// describeRecord says in a line how a module was built.
func describeRecord(r guestbuild.Record) string {
	var tools []string
	for k, v := range r.Toolchain {
		tools = append(tools, k+" "+v)
	}
	sort.Strings(tools)
	d := fmt.Sprintf("%s (%s) with %s; SDK %s %s; source %s (%d files)", r.Lang, r.Mode, strings.Join(tools, ", "),
		r.SDK.Version, r.SDK.Digest, r.Source.Digest, len(r.Source.Files))
	if v := r.Source.VCS; v != nil {
		d += fmt.Sprintf(", %s revision %s", v.System, v.Revision)
	}
	return d
}

// verifySource rebuilds the module a receipt or provenance (what) names
// from dir, as its build record says, and says whether it is that module.
func (e *env) verifySource(module string, rec *guestbuild.Record, dir, what string) int {
	w := e.stdout
	p := kindapi.Printable
	if rec == nil {
		fmt.Fprintf(w, "\nNOT checked against %s: without a build record, nothing says how to rebuild the module; build it yourself and compare its digest with %s.\n", p(dir), module)
		return exitTaskFailed
	}
	fmt.Fprintf(w, "\nRebuilding %s as a %s guest (%s) ...\n", p(dir), rec.Lang, rec.Mode)
	wasm, got, err := guestbuild.Rebuild(context.Background(), dir, *rec, guestbuild.Options{})
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate verify: rebuilding %s: %v\n", dir, err)
		return exitTaskFailed
	}
	digest := sandbox.Digest(wasm)
	diff := rec.Diff(got)
	if digest == module {
		fmt.Fprintf(w, "%s builds the module %s names, byte for byte: %s.\n", p(dir), what, digest)
		return exitOK
	}
	// The same code under the module's record: the records differ only
	// in what the compiler never saw.
	if same, err := guestbuild.WithRecord(wasm, *rec); err == nil && sandbox.Digest(same) == module {
		onlyVCS := true
		for _, d := range diff {
			if !strings.HasPrefix(d, "vcs: ") {
				onlyVCS = false
			}
		}
		if onlyVCS {
			fmt.Fprintf(w, "%s builds the module's code, byte for byte; only the checkout's revision differs (%s), which the compiler never sees.\n", p(dir), p(strings.Join(diff, "; ")))
			return exitOK
		}
		fmt.Fprintf(w, "%s builds the module's code byte for byte, but its source is NOT the one the module's record names:\n", p(dir))
	} else {
		fmt.Fprintf(w, "%s does NOT build the module %s names: it names %s, %s builds %s.\n", p(dir), what, module, p(dir), digest)
	}
	if len(diff) == 0 {
		fmt.Fprintln(w, "The build records agree: this toolchain did not reproduce the module's bytes (a build that is not reproducible).")
		return exitTaskFailed
	}
	fmt.Fprintln(w, "What differs:")
	for _, d := range diff {
		fmt.Fprintf(w, "  - %s\n", p(d))
	}
	return exitTaskFailed
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
