package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

const graphHelp = `Usage: mandate graph [RUN | --run ID] [--format text|json|dot] [--state-dir DIR]

Shows the capability graph of the last recorded run, or of run ID: every
task (who it acted for, its module, how it ended) and every capability (its
kind, its holder, the capability it was derived from, its scope, whether it
was revoked).

Flags:

	--run ID          the run to show (default: the last run that ran, not
	                  one refused before its task started); "mandate run"
	                  logs each run's id ("run recorded: run=ID"); runs are
	                  kept in the run store, STATE_DIR/runs.db
	--format FORMAT   text (default): a tree of tasks and capabilities
	                  json: one object {"version": 1, "run": {...}, "tasks": [...],
	                        "caps": [...], "denials": [...], "flows": [...]};
	                        a task has id, parent, principal, module, state,
	                        label, clearance, denials, error; a cap has id,
	                        kind, name, holder, parent, scope, revoked,
	                        dropped, audited, when, approve_when, rate; a
	                        denial has time, task, principal, cap, kind, op,
	                        errno, reason, label
	                  dot:  a Graphviz digraph: tasks are boxes, capabilities
	                        ellipses; dashed edges go from a task to what it
	                        holds, solid edges from a capability to those
	                        derived from it; revoked capabilities are red
	--state-dir DIR   where runs are recorded (default $MANDATE_STATE_DIR,
	                  else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate)

Examples:

	mandate graph
	mandate graph --format json | jq '.caps[] | select(.revoked)'
	mandate graph --run 20261129T153000Z-ab12cd --format dot | dot -Tsvg > graph.svg
`

func runGraph(e *env, args []string) int {
	c := lookupCommand("graph")
	fs := flagSet("graph")
	runID := fs.String("run", "", "")
	format := fs.String("format", "text", "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) == 1 && *runID == "":
		*runID = pos[0] // mandate graph RUN
	case len(pos) > 0:
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	render, ok := renderers[*format]
	if !ok {
		return e.usageError(c, "unknown format %q (formats: text, json, dot)", *format)
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		return exitUsage
	}
	r, err := readRecord(context.Background(), dir, *runID)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		if errors.Is(err, runstore.ErrNoRuns) {
			fmt.Fprintf(e.stderr, "Run a task with 'mandate run MANIFEST' first.\n")
		}
		return exitUsage
	}
	var buf bytes.Buffer
	if err := render(&buf, r); err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		return exitUsage
	}
	if _, err := e.stdout.Write(buf.Bytes()); err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		return exitUsage
	}
	return exitOK
}

var renderers = map[string]func(io.Writer, *Record) error{
	"text": renderText,
	"json": renderJSON,
	"dot":  renderDOT,
}

func renderJSON(w io.Writer, r *Record) error { return writeJSON(w, r) }

// maxTextDenials bounds the denials the text form lists.
const maxTextDenials = 50

// tree orders the graph's nodes for rendering: children by parent, in
// record order. Nodes whose parent is missing are roots; each node is
// visited once even in a corrupted, cyclic record.
type tree struct {
	taskKids map[string][]kernel.GraphTask
	capKids  map[string][]kernel.GraphCap
	rootTask []kernel.GraphTask
	rootCap  []kernel.GraphCap
}

func newTree(g kernel.Graph) *tree {
	t := &tree{taskKids: map[string][]kernel.GraphTask{}, capKids: map[string][]kernel.GraphCap{}}
	tasks := map[string]bool{}
	for _, x := range g.Tasks {
		tasks[x.ID] = true
	}
	caps := map[string]bool{}
	for _, x := range g.Caps {
		caps[x.ID] = true
	}
	for _, x := range g.Tasks {
		if x.Parent != "" && x.Parent != x.ID && tasks[x.Parent] {
			t.taskKids[x.Parent] = append(t.taskKids[x.Parent], x)
		} else {
			t.rootTask = append(t.rootTask, x)
		}
	}
	for _, x := range g.Caps {
		if x.Parent != "" && x.Parent != x.ID && caps[x.Parent] {
			t.capKids[x.Parent] = append(t.capKids[x.Parent], x)
		} else {
			t.rootCap = append(t.rootCap, x)
		}
	}
	return t
}

func renderText(w io.Writer, r *Record) error {
	var b strings.Builder
	if r.Run.ID != "" {
		fmt.Fprintf(&b, "run %s: %s", r.Run.ID, r.Run.Manifest)
		if !r.Run.Started.IsZero() {
			fmt.Fprintf(&b, " at %s", r.Run.Started.UTC().Format("2006-01-02 15:04:05Z"))
		}
		if !r.Run.Ended.IsZero() && !r.Run.Started.IsZero() {
			fmt.Fprintf(&b, " (%s)", r.Run.Ended.Sub(r.Run.Started).Round(1e6))
		}
		fmt.Fprintf(&b, ", exit %d\n", r.Run.Exit)
	}
	t := newTree(r.Graph)
	seen := map[string]bool{}
	fmt.Fprintf(&b, "tasks:\n")
	if len(r.Tasks) == 0 {
		b.WriteString("  (none)\n")
	}
	var task func(x kernel.GraphTask, depth int)
	task = func(x kernel.GraphTask, depth int) {
		if seen["t:"+x.ID] {
			return
		}
		seen["t:"+x.ID] = true
		fmt.Fprintf(&b, "%s%s  principal=%s  state=%s  module=%s", indent(depth), x.ID, kernel.Printable(x.Principal), x.State, kernel.Printable(shortDigest(x.Module)))
		if x.Denials > 0 {
			fmt.Fprintf(&b, "  denials=%d", x.Denials)
		}
		if !x.Label.IsZero() {
			fmt.Fprintf(&b, "  label=%s", kernel.Printable(x.Label.String()))
		}
		if x.Clearance != nil {
			fmt.Fprintf(&b, "  clearance={%s}", strings.Join(x.Clearance.Conf(), ","))
		}
		b.WriteString("\n")
		if x.Error != "" {
			fmt.Fprintf(&b, "%s  error: %s\n", indent(depth), kernel.EscapeText(oneLine(x.Error)))
		}
		for _, k := range t.taskKids[x.ID] {
			task(k, depth+1)
		}
	}
	for _, x := range t.rootTask {
		task(x, 1)
	}
	// Tasks on a parent cycle (only in a corrupted record) have no root:
	// shown at the top level rather than left out.
	for _, x := range r.Tasks {
		task(x, 1)
	}
	fmt.Fprintf(&b, "caps:\n")
	if len(r.Caps) == 0 {
		b.WriteString("  (none)\n")
	}
	var capf func(x kernel.GraphCap, depth int)
	capf = func(x kernel.GraphCap, depth int) {
		if seen["c:"+x.ID] {
			return
		}
		seen["c:"+x.ID] = true
		fmt.Fprintf(&b, "%s%s %s", indent(depth), x.ID, x.Kind)
		if x.Name != "" {
			fmt.Fprintf(&b, " %q", x.Name)
		}
		fmt.Fprintf(&b, " held by %s", orNone(x.Holder))
		if s := viewSummary(x.View); s != "" {
			fmt.Fprintf(&b, ": %s", s)
		} else if s := scopeSummary(x.Scope); s != "" {
			// A run recorded before kinds described their scopes.
			fmt.Fprintf(&b, ": %s", s)
		}
		b.WriteString(limitsSummary(x))
		for _, f := range []struct {
			on   bool
			mark string
		}{{x.Audited, "[audited]"}, {x.Dropped, "[dropped]"}, {x.Revoked, "[revoked]"}} {
			if f.on {
				b.WriteString(" " + f.mark)
			}
		}
		b.WriteString("\n")
		for _, k := range t.capKids[x.ID] {
			capf(k, depth+1)
		}
	}
	for _, x := range t.rootCap {
		capf(x, 1)
	}
	for _, x := range r.Caps {
		capf(x, 1)
	}
	if len(r.Denials) > 0 {
		fmt.Fprintf(&b, "denials:\n")
		for i, d := range r.Denials {
			if i == maxTextDenials {
				fmt.Fprintf(&b, "  ... %d more (mandate audit --denied)\n", len(r.Denials)-i+r.DenialsDropped)
				break
			}
			cap := d.Cap
			if cap == "" {
				cap = "-"
			}
			fmt.Fprintf(&b, "  %s %s %s %s: %s\n", kernel.Printable(d.Task), kernel.Printable(cap), kernel.Printable(d.Op),
				kernel.Printable(d.Errno), kernel.Printable(truncate(oneLine(d.Reason), 160)))
		}
		if len(r.Denials) <= maxTextDenials && r.DenialsDropped > 0 {
			fmt.Fprintf(&b, "  ... %d more (mandate audit --denied)\n", r.DenialsDropped)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(depth int) string { return strings.Repeat("  ", depth) }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// shortDigest abbreviates "sha256:<64 hex>" to 12 hex digits.
func shortDigest(d string) string {
	if strings.HasPrefix(d, "sha256:") && len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	if d == "" {
		return "(none)"
	}
	return d
}

// scopeSummary renders a scope's JSON object as key=value pairs in key
// order, leaving out empty and zero values; anything else is shown as is.
// viewSummary is a capability's scope as its kind describes it, one
// name=value per field, escaped.
func viewSummary(v kernel.CapView) string {
	parts := make([]string, 0, len(v.Fields))
	for _, f := range v.Fields {
		parts = append(parts, kernel.Printable(f.Name)+"="+quoteIfNeeded(kernel.Printable(f.Value)))
	}
	return strings.Join(parts, " ")
}

// limitsSummary shows what the kernel itself bounds a capability by: its
// constraints, rate, uses and budget, and whether it was passed to a
// child, each in brackets.
func limitsSummary(x kernel.GraphCap) string {
	var b strings.Builder
	for _, p := range limitsParts(x) {
		b.WriteString(" [" + p + "]")
	}
	return b.String()
}

// limitsParts are limitsSummary's items, escaped.
func limitsParts(x kernel.GraphCap) []string {
	var parts []string
	if len(x.When) > 0 {
		parts = append(parts, "when "+kernel.Printable(strings.Join(x.When, " && ")))
	}
	if len(x.ApproveWhen) > 0 {
		parts = append(parts, "approve_when "+kernel.Printable(strings.Join(x.ApproveWhen, " || ")))
	}
	if x.Rate != "" {
		parts = append(parts, "rate "+kernel.Printable(x.Rate))
	}
	if x.View.MaxUses > 0 {
		parts = append(parts, fmt.Sprintf("uses %d of %d", x.View.Uses, x.View.MaxUses))
	}
	if x.View.Budget != "" {
		parts = append(parts, "spent "+kernel.Printable(x.View.Spent)+" of "+kernel.Printable(x.View.Budget))
	}
	if x.View.Passed {
		parts = append(parts, "passed")
	}
	return parts
}

func scopeSummary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return oneLine(string(raw))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var s string
		switch v := m[k].(type) {
		case nil:
			continue
		case bool:
			if !v {
				continue
			}
			s = "true"
		case json.Number:
			if v == "0" {
				continue
			}
			s = v.String()
		case string:
			if v == "" {
				continue
			}
			s = quoteIfNeeded(v)
		case []any:
			if len(v) == 0 {
				continue
			}
			items := make([]string, len(v))
			for i, it := range v {
				if str, ok := it.(string); ok {
					items[i] = quoteIfNeeded(str)
				} else {
					b, _ := json.Marshal(it)
					items[i] = string(b)
				}
			}
			s = strings.Join(items, ",")
		default:
			b, _ := json.Marshal(v)
			s = string(b)
		}
		parts = append(parts, quoteIfNeeded(k)+"="+s)
	}
	return strings.Join(parts, " ")
}

// quoteIfNeeded returns s as is when every rune prints and none is a space, and
// quoted otherwise, so a value from a record can neither split a line of
// the text graph nor pass for another field.
func quoteIfNeeded(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// dotQuote returns s as a DOT quoted string. Backslashes and quotes are
// escaped, newlines become \n; other control characters are dropped.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
			// dropped
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// dotLabel joins lines into one quoted label; each line is escaped.
func dotLabel(lines ...string) string {
	return dotQuote(strings.Join(lines, "\n"))
}

func renderDOT(w io.Writer, r *Record) error {
	var b strings.Builder
	b.WriteString("digraph mandate {\n")
	b.WriteString("  rankdir=LR;\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=9];\n")
	if r.Run.ID != "" {
		fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n", dotLabel("run "+r.Run.ID, r.Run.Manifest))
	}
	taskNode := func(id string) string { return dotQuote("task:" + id) }
	capNode := func(id string) string { return dotQuote("cap:" + id) }
	tasks := map[string]bool{}
	caps := map[string]bool{}
	denied := map[string]int{} // denials by capability
	for _, d := range r.Denials {
		denied[d.Cap]++
	}
	for _, t := range r.Tasks {
		tasks[t.ID] = true
		lines := []string{t.ID + " (" + t.Principal + ")", string(t.State), shortDigest(t.Module)}
		if t.Denials > 0 {
			lines = append(lines, fmt.Sprintf("%d denials", t.Denials))
		}
		if !t.Label.IsZero() {
			lines = append(lines, "label "+t.Label.String())
		}
		if t.Clearance != nil {
			lines = append(lines, "clearance {"+strings.Join(t.Clearance.Conf(), ",")+"}")
		}
		fmt.Fprintf(&b, "  %s [shape=box, label=%s];\n", taskNode(t.ID), dotLabel(lines...))
	}
	for _, c := range r.Caps {
		caps[c.ID] = true
		head := c.ID + " " + c.Kind
		if c.Name != "" {
			head += " " + strconvQuote(c.Name)
		}
		lines := []string{head}
		// The scope as the kind describes it (defaults left out, readable
		// units), then what the kernel bounds it by: the person's intent
		// (when, approve_when), rate, uses, budget. A record of an older
		// Mandate has no description: its raw scope, then.
		if len(c.View.Fields) > 0 {
			for _, f := range c.View.Fields {
				lines = append(lines, kernel.Printable(f.Name)+"="+kernel.Printable(f.Value))
			}
		} else if s := scopeSummary(c.Scope); s != "" {
			lines = append(lines, strings.Fields(s)...)
		}
		lines = append(lines, limitsParts(c)...)
		attrs := "shape=ellipse"
		if n := denied[c.ID]; n > 0 {
			lines = append(lines, fmt.Sprintf("%d denied", n))
			attrs += ", penwidth=2"
		}
		if c.Revoked {
			lines = append(lines, "[revoked]")
			attrs += ", color=red, fontcolor=red"
		} else if c.Dropped {
			attrs += ", style=dotted"
		}
		fmt.Fprintf(&b, "  %s [%s, label=%s];\n", capNode(c.ID), attrs, dotLabel(lines...))
	}
	for _, t := range r.Tasks {
		if t.Parent != "" && tasks[t.Parent] {
			fmt.Fprintf(&b, "  %s -> %s [style=bold, label=\"spawned\"];\n", taskNode(t.Parent), taskNode(t.ID))
		}
	}
	for _, c := range r.Caps {
		if c.Holder != "" && tasks[c.Holder] {
			fmt.Fprintf(&b, "  %s -> %s [style=dashed, arrowhead=none];\n", taskNode(c.Holder), capNode(c.ID))
		}
		if c.Parent != "" && caps[c.Parent] {
			color := ""
			if c.Revoked {
				color = ", color=red"
			}
			if c.View.Passed {
				color += `, label="passed"`
			}
			fmt.Fprintf(&b, "  %s -> %s [style=solid%s];\n", capNode(c.Parent), capNode(c.ID), color)
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
