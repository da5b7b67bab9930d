package cli

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/mandatevm/mandate/internal/graphview"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

const runsHelp = `Usage: mandate runs [--state-dir DIR] [--format text|json]
       mandate runs --nats URLS [--format text|json]

Lists the recorded runs, newest first: id, state, exit code, principal,
number of tasks and capabilities, denials, what the run could do (GRANTS:
its root capabilities, the manifest's grants, by kind and cut short, as
"net: GET api.example; data: benefits (read); pay: ≤ 50.00 EUR"), and the
manifest. A run whose
state is "running" is still running (its process holds a lock on
STATE/running/ID.lock); "crashed" means its process ended without
recording the end, killed or crashed (its audit entries are in the audit
log all the same). A
run whose state is "refused" was recorded as started and then refused
before its task ran (a module that does not compile, a grant or a seed
error); its error says why. Show one with "mandate graph --run ID" or
"mandate audit --run ID", what its tasks left with "mandate logs ID".

Reading works on a state directory that cannot be written (nothing is
created or changed).

With --format json, stdout is a JSON array, newest first, of objects with
id, manifest, task, module, digest, principal, engine, started, ended
(absent while running or crashed), exit (absent likewise), state, error,
tasks, caps, denials and grants (the GRANTS column, at most 100
characters).

With --nats, it lists a fleet's submissions instead (see "mandate node"):
id, state (queued, running, done, refused, lost), the node that owns it
and the run's id in that node's records, exit, submitted and ended.
`

func runRuns(e *env, args []string) int {
	c := lookupCommand("runs")
	fs := flagSet("runs")
	stateFlag := stateDirFlag(fs)
	format := fs.String("format", "text", "")
	natsURLs := fs.String("nats", "", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	if *format != "text" && *format != "json" {
		return e.usageError(c, "unknown format %q (formats: text, json)", *format)
	}
	if *natsURLs != "" {
		return e.listFleetRuns(*natsURLs, *format)
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate runs: %v\n", err)
		return exitUsage
	}
	if nothingRecorded(dir) {
		return e.listRuns(*format, dir, nil, nil)
	}
	s, err := readStore(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate runs: %v\n", err)
		return exitUsage
	}
	defer s.Close()
	for _, err := range s.ImportErrors {
		fmt.Fprintf(e.stderr, "mandate runs: warning: %v\n", err)
	}
	runs, err := s.List(context.Background())
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate runs: %v\n", err)
		return exitUsage
	}
	roots, err := s.RootCaps(context.Background())
	if err != nil { // the list without its GRANTS rather than none
		fmt.Fprintf(e.stderr, "mandate runs: warning: %v\n", err)
	}
	return e.listRuns(*format, dir, runs, roots)
}

// runLine is one run in "mandate runs --format json".
type runLine struct {
	runstore.Run
	Ended   *time.Time `json:"ended,omitempty"`
	Exit    *int       `json:"exit,omitempty"`
	Tasks   int        `json:"tasks"`
	Caps    int        `json:"caps"`
	Denials int        `json:"denials"`
	Grants  string     `json:"grants"`
}

// Bounds of the GRANTS summary (graphview.GrantsSummary), in runes.
const (
	grantsShown = 60
	grantsJSON  = 100
)

// listRuns prints runs; roots are their root capabilities by run id
// (runstore.Store.RootCaps), for the GRANTS column.
func (e *env) listRuns(format, dir string, runs []runstore.Summary, roots map[string][]kernel.GraphCap) int {
	if format == "json" {
		lines := make([]runLine, 0, len(runs))
		for _, r := range runs {
			l := runLine{Run: r.Run, Tasks: r.Tasks, Caps: r.Caps, Denials: r.Denials, Grants: graphview.GrantsSummary(roots[r.ID], grantsJSON)}
			if !r.Run.Ended.IsZero() {
				ended, exit := r.Run.Ended, r.Run.Exit
				l.Ended, l.Exit = &ended, &exit
			}
			lines = append(lines, l)
		}
		if err := writeJSON(e.stdout, lines); err != nil {
			fmt.Fprintf(e.stderr, "mandate runs: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	if len(runs) == 0 {
		fmt.Fprintf(e.stdout, "no runs recorded yet in %s\n", kindapi.Printable(dir))
		return exitOK
	}
	var table bytes.Buffer
	w := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTATE\tEXIT\tPRINCIPAL\tTASKS\tCAPS\tDENIALS\tGRANTS\tMANIFEST\tREASON")
	for _, r := range runs {
		exit := strconv.Itoa(r.Exit)
		if r.Ended.IsZero() {
			exit = "-" // still running, or its process died before recording the end
		}
		p := kindapi.Printable
		grants := graphview.GrantsSummary(roots[r.ID], grantsShown)
		if grants == "" {
			grants = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", p(r.ID), p(r.State), exit, p(r.Principal), r.Tasks, r.Caps, r.Denials,
			grants, p(r.Manifest), p(shortReason(r.Error)))
	}
	w.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		// A run with no reason leaves its row padded: no trailing blanks.
		if l := strings.TrimRight(line, " \n"); l != "" {
			fmt.Fprintln(e.stdout, l)
		}
	}
	return exitOK
}

// maxReasonShown bounds the reason "mandate runs" shows of a run's error
// (--format json and "mandate graph RUN" have the whole).
const maxReasonShown = 120

// shortReason is a run's error as one line of at most maxReasonShown
// bytes.
func shortReason(err string) string {
	err = strings.Join(strings.Fields(err), " ")
	if len(err) <= maxReasonShown {
		return err
	}
	cut := maxReasonShown
	for cut > 0 && !utf8.RuneStart(err[cut]) {
		cut--
	}
	return err[:cut] + "..."
}
