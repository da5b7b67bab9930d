package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

const logsHelp = `Usage: mandate logs [RUN [TASK]] [--stream result|stdout|stderr] [--raw]
                    [--format text|json] [--state-dir DIR]

Shows what the tasks of a recorded run left: each task's result (what it
set with mandate.SetResult) and what was kept of its stdout and stderr
(at most its limits.output). The run store keeps at most the task's
limits.stored_output (default 1MiB) of each; a mark says how much was
dropped past a limit, and the whole size.
RUN is a run id ("mandate runs" lists them; "mandate run" prints it);
without it, or when it is "last", the last run that ran. TASK (t1, t2,
...) shows one task's: mandate logs last t2.

A guest chose these bytes: on a terminal, control characters and escape
sequences in them are escaped, unless --raw; a pipe or a file gets them
as they are.

What a task wrote once it carried untrusted data that its answer refuses
(result { accepts_untrusted = false } or refuses_taints) is withheld: it is not the task's
answer, and only --raw shows it (its heading says "withheld"; in JSON,
"withheld": true, and its data only with --raw).

Flags:

	--stream NAME   only that stream, with no headings: the bytes alone
	                (for scripts: mandate logs RUN t2 --stream stdout > out)
	--raw           write the bytes as they are even to a terminal, and
	                show withheld output
	--format json   a JSON array of {"task", "stream", "data" (base64),
	                "truncated", "dropped", "size" (the whole: data and
	                dropped)}
	--state-dir DIR where runs are recorded (see "mandate run --help")

A run whose process died (crashed) recorded nothing of its output: its
audit entries are in the audit log ("mandate audit --run RUN").

Examples:

	mandate logs
	mandate logs 20261201T120000Z-ab12cd t1 --stream result
	mandate logs --format json | jq -r '.[] | select(.stream=="stderr") | .data | @base64d'
`

func runLogs(e *env, args []string) int {
	c := lookupCommand("logs")
	fs := flagSet("logs")
	stateFlag := stateDirFlag(fs)
	stream := fs.String("stream", "", "")
	raw := fs.Bool("raw", false, "")
	format := fs.String("format", "text", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 2 {
		return e.usageError(c, "unexpected argument %q", pos[2])
	}
	switch *stream {
	case "", runstore.StreamResult, runstore.StreamStdout, runstore.StreamStderr:
	default:
		return e.usageError(c, "unknown stream %q (streams: result, stdout, stderr)", *stream)
	}
	if *format != "text" && *format != "json" {
		return e.usageError(c, "unknown format %q (formats: text, json)", *format)
	}
	var run, task string
	if len(pos) > 0 && pos[0] != "last" {
		run = pos[0]
	}
	if len(pos) > 1 {
		task = pos[1]
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate logs: %v\n", err)
		return exitUsage
	}
	if nothingRecorded(dir) {
		fmt.Fprintf(e.stderr, "mandate logs: %v in %s\n", runstore.ErrNoRuns, kindapi.Printable(dir))
		return exitUsage
	}
	s, err := readStore(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate logs: %v\n", err)
		return exitUsage
	}
	defer s.Close()
	ctx := context.Background()
	rec, err := s.Get(ctx, run)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate logs: %v\n", kindapi.EscapeText(err.Error()))
		return exitUsage
	}
	if task != "" && !hasTask(rec, task) {
		fmt.Fprintf(e.stderr, "mandate logs: run %s has no task %s (its tasks: %s)\n",
			rec.Run.ID, kindapi.Printable(task), taskIDs(rec))
		return exitUsage
	}
	outs, err := s.Outputs(ctx, rec.Run.ID, task)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate logs: %v\n", err)
		return exitUsage
	}
	if *stream != "" {
		kept := outs[:0]
		for _, o := range outs {
			if o.Stream == *stream {
				kept = append(kept, o)
			}
		}
		outs = kept
	}
	if !*raw {
		for i := range outs {
			if outs[i].Withheld {
				outs[i].Data = nil // its size stays: Size
			}
		}
	}
	if *format == "json" {
		for i := range outs {
			if outs[i].Data == nil {
				outs[i].Data = []byte{}
			}
		}
		if err := writeJSON(e.stdout, outs); err != nil {
			fmt.Fprintf(e.stderr, "mandate logs: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	escape := !*raw && e.isTerm(e.stdout)
	write := func(w io.Writer, b []byte) {
		if escape {
			b = []byte(kindapi.EscapeText(string(b)))
		}
		w.Write(b)
	}
	if *stream != "" {
		for _, o := range outs {
			write(e.stdout, o.Data)
		}
		return exitOK
	}
	if len(outs) == 0 {
		fmt.Fprintf(e.stdout, "run %s (%s): no task left a result or any output\n", rec.Run.ID, kindapi.Printable(rec.Run.State))
		return exitOK
	}
	for _, o := range outs {
		if o.Withheld && !*raw {
			fmt.Fprintf(e.stdout, "== %s %s (%d bytes withheld: written after the task read untrusted data, which its answer refuses; --raw shows them)\n",
				o.Task, o.Stream, o.Size)
			continue
		}
		fmt.Fprintf(e.stdout, "== %s %s (%d bytes", o.Task, o.Stream, len(o.Data))
		if o.Withheld {
			fmt.Fprint(e.stdout, "; withheld: written after the task read untrusted data, which its answer refuses")
		}
		if o.Truncated {
			fmt.Fprintf(e.stdout, "; truncated at the limit: %d bytes dropped of %d", o.Dropped, o.Size)
		}
		fmt.Fprintln(e.stdout, ")")
		write(e.stdout, o.Data)
		if n := len(o.Data); n > 0 && o.Data[n-1] != '\n' {
			fmt.Fprintln(e.stdout)
		}
	}
	return exitOK
}

func hasTask(rec *Record, id string) bool {
	for _, t := range rec.Tasks {
		if t.ID == id {
			return true
		}
	}
	return false
}

func taskIDs(rec *Record) string {
	s := ""
	for i, t := range rec.Tasks {
		if i > 0 {
			s += ", "
		}
		s += kindapi.Printable(t.ID)
	}
	if s == "" {
		s = "none"
	}
	return s
}
