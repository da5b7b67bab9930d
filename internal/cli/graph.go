package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/graphview"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

const graphHelp = `Usage: mandate graph [RUN | last | --run ID] [--format text|json|dot|svg]
                     [--output FILE] [--state-dir DIR] [--cache-dir DIR]
       mandate graph [RUN | last] --nats URLS [--format ...] [--output FILE]

Shows the capability graph of the last recorded run, or of run ID: every
task (who it acted for, its module, how it ended) and every capability (its
kind, its holder, the capability it was derived from, its scope, whether it
was revoked).

With --nats, it shows a run of a fleet instead (see "mandate node"): RUN
is the run's id on its node or its submission's id (as "mandate run
--nats" and "mandate runs --nats" print them), "last" the last submission
that a node ran. The graph is the record the run's node copied to the
fleet when the run ended (to MANDATE_AUDIT, beside its audit log's copy):
the same record, and so the same graph, as "mandate graph RUN
--state-dir" on that node. A run still running, or lost with its node,
has no copy yet: the error says where its record is.

Flags:

	--nats URLS       show a fleet's run: the record its node copied to the
	                  fleet on these NATS servers (comma-separated)
	--run ID          the run to show (default, or "last": the last run that
	                  ran, not one refused before its task started); "mandate run"
	                  logs each run's id ("run recorded: run=ID"); runs are
	                  kept in the run store, STATE_DIR/runs.db
	--format FORMAT   text (default): a tree of tasks and capabilities
	                  json: one object {"version": 1, "run": {...}, "tasks": [...],
	                        "caps": [...], "denials": [...], "flows": [...],
	                        "approvals": [...], "effects": [...]};
	                        a task has id, parent, principal, module, state,
	                        label, clearance, denials, error; a cap has id,
	                        kind, name, holder, parent, scope, revoked,
	                        dropped, audited, when, approve_when, rate; a
	                        denial has time, task, principal, cap, kind, op,
	                        errno, reason, label; an approval has time, task,
	                        cap, kind, op, summary, digest (the whole
	                        effect's), answer (yes, no, remembered, failed),
	                        channel and by (who answered); an effect (what a
	                        call did outside the kernel, from the audit log)
	                        has time, task, cap, kind, op, summary (what was
	                        done, as the task wrote it), outcome, errno
	                  svg:  the picture, drawn by Graphviz built into mandate
	                        (nothing to install): each task a box in a frame
	                        with the capabilities it held, spawn edges
	                        between tasks, derivation edges between
	                        capabilities (dashed: a task to what it got from
	                        outside); each capability's scope as its kind
	                        describes it, with when, approve_when, uses and
	                        budget; revoked ones struck through; denials and
	                        denied flows in red with their counts (allowed
	                        flows grey), the first denials on each
	                        capability with their reasons; a label is
	                        {confidentiality tags}/{integrity tags}. Node ids:
	                        task-ID and cap-ID (bytes but letters, digits,
	                        "." and "-" as _XX). The first picture compiles
	                        Graphviz (about a second), kept in CACHE/graphviz
	                  dot:  the svg picture's Graphviz source
	--output FILE     write the graph to FILE instead of stdout
	--state-dir DIR   where runs are recorded (default $MANDATE_STATE_DIR,
	                  else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate)
	--cache-dir DIR   the cache root (default $MANDATE_CACHE_DIR, else the
	                  user cache directory + /mandate): svg keeps Graphviz's
	                  compiled code in DIR/graphviz

Everything a guest or a manifest chose is escaped in every format; the
picture holds text and shapes only (no script, no link).

Examples:

	mandate graph
	mandate graph --format json | jq '.caps[] | select(.revoked)'
	mandate graph --format svg --output graph.svg
	mandate graph --run 20261129T153000Z-ab12cd --format dot | dot -Tpng
	mandate graph last --nats nats://127.0.0.1:4222 --format svg --output run.svg
`

func runGraph(e *env, args []string) int {
	c := lookupCommand("graph")
	fs := flagSet("graph")
	runID := fs.String("run", "", "")
	format := fs.String("format", "text", "")
	output := fs.String("output", "", "")
	stateFlag := stateDirFlag(fs)
	cacheFlag := fs.String("cache-dir", "", "")
	natsURLs := fs.String("nats", "", "")
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
	if !ok && *format != "svg" {
		return e.usageError(c, "unknown format %q (formats: text, json, dot, svg)", *format)
	}
	ctx := e.context()
	var r *Record
	var err error
	if *natsURLs != "" {
		if *stateFlag != "" {
			return e.usageError(c, "--nats and --state-dir: a fleet's run is read from the fleet, not a state directory")
		}
		r, err = e.fleetRecord(ctx, *natsURLs, *runID)
	} else {
		var dir string
		if dir, err = e.stateDir(*stateFlag); err != nil {
			fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
			return exitUsage
		}
		r, err = readRecord(ctx, dir, *runID)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		if errors.Is(err, runstore.ErrNoRuns) && *natsURLs == "" {
			fmt.Fprintf(e.stderr, "Run a task with 'mandate run MANIFEST' first.\n")
		} else if errors.Is(err, runstore.ErrNoRuns) {
			fmt.Fprintf(e.stderr, "Submit one with 'mandate run --nats URLS MANIFEST' first.\n")
		}
		return exitUsage
	}
	var out []byte
	if *format == "svg" {
		out, err = graphview.SVG(ctx, r, graphview.Options{CacheDir: e.graphvizCache(*cacheFlag)})
	} else {
		var buf bytes.Buffer
		err = render(&buf, r)
		out = buf.Bytes()
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		return exitUsage
	}
	// Every format escapes what guests chose: printed on a terminal as
	// it is written to a file.
	if *output != "" {
		err = host.WriteFileAtomic(*output, out, 0o644)
	} else {
		_, err = e.stdout.Write(out)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate graph: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// fleetRecord reads the record of a fleet's run id (a run id, a
// submission id, or "" or "last") for mandate graph --nats.
func (e *env) fleetRecord(ctx context.Context, urls, id string) (*Record, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nc, f, err := connectFleet(ctx, urls, "mandate graph", 1)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	return newFleetRuns(f, urls).Get(ctx, id)
}

// graphvizCache is where SVG keeps Graphviz's compiled code: the cache
// root's graphviz directory, none when there is no cache root (a home
// without a cache directory).
func (e *env) graphvizCache(flagValue string) string {
	root, err := e.cacheDir(flagValue)
	if err != nil {
		return ""
	}
	return filepath.Join(root, "graphviz")
}

// renderers are the formats drawn from the record alone (svg needs a
// cache and a context).
var renderers = map[string]func(io.Writer, *Record) error{
	"text": renderText,
	"json": renderJSON,
	"dot":  graphview.DOT,
}

// Names the rest of the package uses for graphview's helpers (one
// implementation, shared with the DOT and SVG forms).
var (
	renderDOT    = graphview.DOT
	scopeSummary = graphview.ScopeSummary
	viewSummary  = graphview.ViewSummary
	oneLine      = graphview.OneLine
)

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
		fmt.Fprintf(&b, "%s%s  principal=%s  state=%s  module=%s", indent(depth), x.ID, kindapi.Printable(x.Principal), x.State, kindapi.Printable(graphview.ShortDigest(x.Module)))
		if x.Denials > 0 {
			fmt.Fprintf(&b, "  denials=%d", x.Denials)
		}
		if !x.Label.IsZero() {
			fmt.Fprintf(&b, "  label=%s", kindapi.Printable(x.Label.String()))
		}
		if x.Clearance != nil {
			fmt.Fprintf(&b, "  clearance={%s}", strings.Join(x.Clearance.Conf(), ","))
		}
		b.WriteString("\n")
		if x.Error != "" {
			fmt.Fprintf(&b, "%s  error: %s\n", indent(depth), kindapi.EscapeText(oneLine(x.Error)))
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
			fmt.Fprintf(&b, "  %s %s %s %s: %s\n", kindapi.Printable(d.Task), kindapi.Printable(cap), kindapi.Printable(d.Op),
				kindapi.Printable(d.Errno), kindapi.Printable(truncate(oneLine(d.Reason), 160)))
		}
		if len(r.Denials) <= maxTextDenials && r.DenialsDropped > 0 {
			fmt.Fprintf(&b, "  ... %d more (mandate audit --denied)\n", r.DenialsDropped)
		}
	}
	if len(r.Approvals) > 0 {
		fmt.Fprintf(&b, "approvals:\n")
		for i, a := range r.Approvals {
			if i == maxTextDenials {
				fmt.Fprintf(&b, "  ... %d more (mandate audit)\n", len(r.Approvals)-i)
				break
			}
			how := a.Answer
			if a.Channel != "" {
				how += " by " + a.Channel
			}
			if a.By != "" {
				how += " (" + truncate(oneLine(a.By), 80) + ")"
			}
			fmt.Fprintf(&b, "  %s %s %s %s: %s [%s]\n", kindapi.Printable(a.Task), kindapi.Printable(orNone(a.Cap)), kindapi.Printable(a.Op),
				kindapi.Printable(how), kindapi.Printable(truncate(oneLine(a.Summary), 120)), kindapi.Printable(graphview.ShortDigest(a.Digest)))
		}
	}
	if len(r.Effects) > 0 {
		fmt.Fprintf(&b, "effects:\n")
		for i, ef := range r.Effects {
			if i == maxTextDenials {
				fmt.Fprintf(&b, "  ... %d more (mandate audit)\n", len(r.Effects)-i+r.EffectsDropped)
				break
			}
			b.WriteString(effectLine(ef))
		}
		if len(r.Effects) <= maxTextDenials && r.EffectsDropped > 0 {
			fmt.Fprintf(&b, "  ... %d more (mandate audit)\n", r.EffectsDropped)
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

// limitsSummary shows what the kernel itself bounds a capability by: its
// constraints, rate, uses and budget, and whether it was passed to a
// child, each in brackets.
func limitsSummary(x kernel.GraphCap) string {
	var b strings.Builder
	for _, p := range graphview.LimitsParts(x) {
		b.WriteString(" [" + p + "]")
	}
	return b.String()
}
