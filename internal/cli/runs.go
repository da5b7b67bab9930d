package cli

import (
	"fmt"
	"text/tabwriter"
)

const runsHelp = `Usage: mandate runs [--state-dir DIR]

Lists the recorded runs, newest first: id, state, exit code, principal,
number of tasks and capabilities, denials, and the manifest. Show one with
"mandate graph --run ID" or "mandate audit --run ID".
`

func runRuns(e *env, args []string) int {
	c := lookupCommand("runs")
	fs := flagSet("runs")
	stateFlag := fs.String("state-dir", "", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate runs: %v\n", err)
		return exitUsage
	}
	ids, err := listRuns(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate runs: %v\n", err)
		return exitUsage
	}
	if len(ids) == 0 {
		fmt.Fprintf(e.stdout, "no runs recorded yet in %s\n", dir)
		return exitOK
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTATE\tEXIT\tPRINCIPAL\tTASKS\tCAPS\tDENIALS\tMANIFEST")
	for _, id := range ids {
		r, _, err := readRecord(dir, id)
		if err != nil {
			fmt.Fprintf(w, "%s\t(unreadable: %s)\t\t\t\t\t\t\n", id, truncate(oneLine(err.Error()), 80))
			continue
		}
		denials := 0
		for _, t := range r.Tasks {
			denials += t.Denials
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", id, r.Run.State, r.Run.Exit, r.Run.Principal, len(r.Tasks), len(r.Caps), denials, r.Run.Manifest)
	}
	w.Flush()
	return exitOK
}
