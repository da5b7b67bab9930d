package graphview

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// How much of a record's strings the picture shows; the JSON form has
// them whole.
const (
	maxID     = 40  // a task or capability id
	maxName   = 60  // a principal, a capability's name
	maxLine   = 100 // a scope field, a constraint, a label
	maxReason = 100 // a denial's reason, a task's error
	// MaxDenialsShown is how many denials a capability (or a task, for
	// those made on no capability) lists; the rest are counted.
	MaxDenialsShown = 3
)

// TaskElementID is the id of a task's node in the SVG ("task-" and the
// task's id); CapElementID the id of a capability's. Bytes other than
// ASCII letters, digits, '.' and '-' are written _XX (hex), '_' too, so
// the mapping is one to one and an id is a plain token whatever the
// record holds: "t1" is "task-t1".
func TaskElementID(id string) string { return "task-" + elementID(id) }

// CapElementID is the SVG id of capability id's node: "c1" is "cap-c1".
func CapElementID(id string) string { return "cap-" + elementID(id) }

func elementID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// DOT writes rec's capability graph as a Graphviz digraph, the source of
// SVG's picture: each task a box (its id, principal, state, module, label,
// clearance, error) in a cluster with the capabilities it held; spawn
// edges from a task to its children, derivation edges from a capability
// to those derived from it (dashed lines join a task to the capabilities
// it got from outside); each capability with its scope as its kind
// describes it and the person's intent (when, approve_when, uses, budget);
// revoked ones struck through; denials and denied flows as red marks (allowed flows grey) with their
// counts, each denial listed under the capability it was made on, with
// its reason.
//
// Every string of the record is escaped (labels are HTML-like: no record
// string can open a tag or end a quoted string) and none becomes a URL.
func DOT(w io.Writer, rec *runstore.Record) error {
	_, err := io.WriteString(w, buildDOT(rec))
	return err
}

// Fixed colours of the picture.
const (
	red      = "#c62828"
	grey     = "#757575"
	taskFill = "#eef3fb"
	capFill  = "#fbfbf6"
)

func buildDOT(rec *runstore.Record) string {
	var b strings.Builder
	b.WriteString("digraph mandate {\n")
	b.WriteString("  graph [rankdir=LR, fontname=\"Helvetica\", fontsize=11, labelloc=t, labeljust=l, nodesep=0.25, ranksep=0.6, class=\"mandate\"];\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=10, shape=box];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=9, color=\"#546e7a\"];\n")

	// Nodes are named by their index (t0, c0): record ids reach the
	// picture only as escaped text and element ids.
	taskNode, capNode := map[string]string{}, map[string]string{}
	for i, t := range rec.Tasks {
		if _, dup := taskNode[t.ID]; !dup {
			taskNode[t.ID] = "t" + strconv.Itoa(i)
		}
	}
	capHolder := map[string]string{}
	for i, c := range rec.Caps {
		if _, dup := capNode[c.ID]; !dup {
			capNode[c.ID] = "c" + strconv.Itoa(i)
			capHolder[c.ID] = c.Holder
		}
	}

	// Denials under their capability, else under their task, else in
	// the graph's label; flows under their capability.
	capDenials, taskDenials := map[string][]runstore.Denial{}, map[string][]runstore.Denial{}
	lost := 0
	for _, d := range rec.Denials {
		switch {
		case d.Cap != "" && capNode[d.Cap] != "":
			capDenials[d.Cap] = append(capDenials[d.Cap], d)
		case taskNode[d.Task] != "":
			taskDenials[d.Task] = append(taskDenials[d.Task], d)
		default:
			lost++
		}
	}
	if l := runLabel(rec, lost); len(l) > 0 {
		fmt.Fprintf(&b, "  label=%s;\n", htmlLabel(l))
	}
	capFlows := map[string][]runstore.Flow{}
	for _, f := range rec.Flows {
		if capNode[f.Cap] != "" {
			capFlows[f.Cap] = append(capFlows[f.Cap], f)
		}
	}

	held := map[string][]int{} // task id -> indexes of the caps it held
	var loose []int            // caps held by no task of the record
	for i, c := range rec.Caps {
		if capNode[c.ID] != "c"+strconv.Itoa(i) {
			continue // a duplicate id: drawn once
		}
		if taskNode[c.Holder] != "" {
			held[c.Holder] = append(held[c.Holder], i)
		} else {
			loose = append(loose, i)
		}
	}
	for i, t := range rec.Tasks {
		name := "t" + strconv.Itoa(i)
		if taskNode[t.ID] != name {
			continue
		}
		fmt.Fprintf(&b, "  subgraph cluster_%s {\n", name)
		fmt.Fprintf(&b, "    id=%s; class=\"holder\"; label=\"\"; style=\"rounded,dashed\"; color=\"#b0bec5\";\n", dotQuote("holder-"+elementID(t.ID)))
		fmt.Fprintf(&b, "    %s [id=%s, class=%s, style=\"filled\", fillcolor=%q, label=%s];\n",
			name, dotQuote(TaskElementID(t.ID)), dotQuote(taskClass(t)), taskFill, htmlLabel(taskLines(t, taskDenials[t.ID])))
		for _, ci := range held[t.ID] {
			b.WriteString("    " + capNodeDOT(rec.Caps[ci], capNode[rec.Caps[ci].ID], capDenials, capFlows))
		}
		b.WriteString("  }\n")
	}
	for _, ci := range loose {
		b.WriteString("  " + capNodeDOT(rec.Caps[ci], capNode[rec.Caps[ci].ID], capDenials, capFlows))
	}

	for i, t := range rec.Tasks {
		name := "t" + strconv.Itoa(i)
		if taskNode[t.ID] != name || t.Parent == "" || t.Parent == t.ID || taskNode[t.Parent] == "" {
			continue
		}
		fmt.Fprintf(&b, "  %s -> %s [class=\"spawn\", style=bold, label=\"spawned\"];\n", taskNode[t.Parent], name)
	}
	for i, c := range rec.Caps {
		name := "c" + strconv.Itoa(i)
		if capNode[c.ID] != name {
			continue
		}
		parent := capNode[c.Parent]
		if c.Parent == c.ID {
			parent = ""
		}
		// A task is joined to what it got from outside: a root
		// capability, or one passed to it by its parent's holder.
		if h := taskNode[c.Holder]; h != "" && (parent == "" || capHolder[c.Parent] != c.Holder) {
			fmt.Fprintf(&b, "  %s -> %s [class=\"holds\", style=dashed, arrowhead=none, color=%q];\n", h, name, grey)
		}
		if parent != "" {
			attrs := `class="derive"`
			if c.Revoked {
				attrs += fmt.Sprintf(", color=%q", grey)
			}
			if c.View.Passed {
				attrs += `, label="passed"`
			}
			fmt.Fprintf(&b, "  %s -> %s [%s];\n", parent, name, attrs)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// runLabel is the graph's label: the run, and what the picture leaves out
// (lost: denials on no task and no capability of the record).
func runLabel(rec *runstore.Record, lost int) []string {
	var lines []string
	if rec.Run.ID != "" {
		head := bold("run " + text(rec.Run.ID, maxLine))
		if rec.Run.Manifest != "" {
			head += nbsp + text(rec.Run.Manifest, maxLine)
		}
		lines = append(lines, head)
		var facts []string
		if rec.Run.State != "" {
			facts = append(facts, text(rec.Run.State, maxName))
		}
		if !rec.Run.Ended.IsZero() {
			facts = append(facts, fmt.Sprintf("exit %d", rec.Run.Exit))
		}
		if !rec.Run.Started.IsZero() {
			facts = append(facts, rec.Run.Started.UTC().Format("2006-01-02 15:04:05Z"))
		}
		if len(facts) > 0 {
			lines = append(lines, strings.Join(facts, ", "))
		}
	}
	if n := lost + rec.DenialsDropped; n > 0 {
		lines = append(lines, colour(red, fmt.Sprintf("%d more denials, not drawn (mandate audit --denied)", n)))
	}
	if rec.FlowsDropped > 0 {
		lines = append(lines, colour(red, fmt.Sprintf("%d more flows, not drawn (mandate audit)", rec.FlowsDropped)))
	}
	for _, t := range rec.Tasks {
		if !t.Label.IsZero() {
			// How to read the tasks' labels, once, when one is drawn.
			lines = append(lines, colour(grey, small("label {C}/{I}: C, the confidentiality tags of what the task holds; I, its integrity taints (the sources that influenced it)")))
			break
		}
	}
	return lines
}

// taskClass is a task node's SVG class: "task" and the task's state when
// it is one the kernel has.
func taskClass(t kernel.GraphTask) string {
	switch t.State {
	case kernel.TaskRunning, kernel.TaskDone, kernel.TaskFailed, kernel.TaskTimedOut, kernel.TaskOutOfMemory, kernel.TaskKilled:
		return "task " + string(t.State)
	}
	return "task"
}

func ended(s kernel.TaskState) bool {
	return s == kernel.TaskFailed || s == kernel.TaskTimedOut || s == kernel.TaskOutOfMemory || s == kernel.TaskKilled
}

func taskLines(t kernel.GraphTask, denials []runstore.Denial) []string {
	lines := []string{bold(text(t.ID, maxID)) + nbsp + text(t.Principal, maxName)}
	state := text(string(t.State), maxName)
	if ended(t.State) {
		state = colour(red, state)
	}
	if t.Module != "" {
		state += "  " + text(ShortDigest(t.Module), maxLine)
	}
	lines = append(lines, state)
	if !t.Label.IsZero() {
		lines = append(lines, "label "+text(t.Label.String(), maxLine))
	}
	if t.Clearance != nil {
		lines = append(lines, "clearance {"+text(strings.Join(t.Clearance.Conf(), ","), maxLine)+"}")
	}
	if t.Error != "" {
		lines = append(lines, colour(red, "error: "+text(OneLine(t.Error), maxReason)))
	}
	if t.Denials > 0 {
		lines = append(lines, colour(red, bold(plural(t.Denials, "denial"))))
	}
	if len(denials) > 0 {
		lines = append(lines, colour(red, "on no capability:"))
		lines = append(lines, denialLines(denials)...)
	}
	return lines
}

func capNodeDOT(c kernel.GraphCap, name string, denials map[string][]runstore.Denial, flows map[string][]runstore.Flow) string {
	head := bold(text(c.ID, maxID)) + nbsp + text(c.Kind, maxName)
	if c.Name != "" {
		head += " " + text(strconv.Quote(c.Name), maxName)
	}
	lines := []string{head}
	for _, s := range capScope(c) {
		lines = append(lines, text(s, maxLine))
	}
	for _, s := range LimitsParts(c) {
		lines = append(lines, text(s, maxLine))
	}
	var marks []string
	for _, f := range []struct {
		on   bool
		mark string
	}{{c.Audited, "[audited]"}, {c.Dropped, "[dropped]"}, {c.Revoked, "[revoked]"}} {
		if f.on {
			marks = append(marks, f.mark)
		}
	}
	if len(marks) > 0 {
		lines = append(lines, strings.Join(marks, " "))
	}
	if c.Revoked {
		for i, l := range lines {
			lines[i] = strike(l)
		}
	}
	class, style, attrs := "cap", "rounded,filled", ""
	ds := denials[c.ID]
	switch {
	case c.Revoked:
		class += " revoked"
		attrs += fmt.Sprintf(", fontcolor=%q", grey)
		if len(ds) == 0 {
			attrs += fmt.Sprintf(", color=%q", grey)
		}
	case c.Dropped:
		class += " dropped"
		style += ",dotted"
	}
	if len(ds) > 0 {
		class += " denied"
		attrs += fmt.Sprintf(", color=%q, penwidth=2", red)
		lines = append(lines, colour(red, bold(fmt.Sprintf("%d denied", len(ds)))))
		lines = append(lines, denialLines(ds)...)
	}
	if fs := flows[c.ID]; len(fs) > 0 {
		class += " flowed"
		// Red when a flow was denied; flows the kernel allowed are no alarm.
		col := grey
		for _, f := range fs {
			if f.Decision != "allow" {
				col = red
			}
		}
		lines = append(lines, colour(col, bold(plural(len(fs), "flow"))+": "+flowCounts(fs)))
	}
	return fmt.Sprintf("%s [id=%s, class=%s, style=%q, fillcolor=%q%s, label=%s];\n",
		name, dotQuote(CapElementID(c.ID)), dotQuote(class), style, capFill, attrs, htmlLabel(lines))
}

// denialLines lists the first MaxDenialsShown denials, each with its
// errno, operation and reason, and counts the rest.
func denialLines(ds []runstore.Denial) []string {
	var lines []string
	for i, d := range ds {
		if i == MaxDenialsShown {
			lines = append(lines, colour(red, small(fmt.Sprintf("... %d more (mandate audit --denied)", len(ds)-i))))
			break
		}
		s := strings.TrimSpace(d.Errno + " " + d.Op)
		if r := OneLine(d.Reason); r != "" {
			s += ": " + r
		}
		lines = append(lines, colour(red, small(text(s, maxReason))))
	}
	return lines
}

// flowCounts counts flows by decision and errno: "2 deny EFLOW, 1 allow".
func flowCounts(fs []runstore.Flow) string {
	n := map[string]int{}
	for _, f := range fs {
		n[strings.TrimSpace(f.Decision+" "+f.Errno)]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Itoa(n[k]) + " " + text(k, maxName)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// text is s as it may stand in an HTML-like label: escaped for a person
// (kindapi.Printable: no control character, invalid UTF-8 or bidi override
// is left), cut to max runes, then XML-escaped, so that no record string
// opens a tag or an entity.
func text(s string, max int) string {
	s = kindapi.Printable(s)
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max]) + "…"
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&#39;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The markup of labels; their arguments are already escaped (text).
func bold(s string) string      { return wrap("<B>", s, "</B>") }
func small(s string) string     { return wrap(`<FONT POINT-SIZE="8">`, s, "</FONT>") }
func strike(s string) string    { return wrap("<S>", s, "</S>") }
func colour(c, s string) string { return wrap(`<FONT COLOR="`+c+`">`, s, "</FONT>") }

func wrap(open, s, close string) string {
	if s == "" {
		return ""
	}
	return open + s + close
}

// nbsp separates text from a tag: Graphviz drops a plain space there.
const nbsp = "&#160;"

// htmlLabel joins label lines, each left-aligned, into an HTML-like label.
func htmlLabel(lines []string) string {
	const br = `<BR ALIGN="LEFT"/>`
	return "<" + strings.Join(lines, br) + br + ">"
}

// dotQuote returns s as a DOT quoted string: backslashes and quotes
// escaped, newlines as \n, other control characters dropped.
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
