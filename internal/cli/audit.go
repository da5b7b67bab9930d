package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

const auditHelp = `Usage: mandate audit [RUN | --run ID | --all] [--task T] [--denied] [--format text|json] [--state-dir DIR]
       mandate audit verify [RUN] [--state-dir DIR]
       mandate audit verify --nats URLS
       mandate audit key [--pem] [--state-dir DIR]

Shows the audit log: every decision on an audited capability (written before
its effect) and every denial, for the last run (or run ID, or --all runs).
The log is an RFC 6962 Merkle log in STATE_DIR/audit.db with checkpoints
signed by STATE_DIR/audit.key (Ed25519, created on first use, mode 0600).

"mandate audit verify" recomputes the whole tree from the entries, checks it
against the stored hashes and the signed checkpoints, and names the first
entry that was changed, deleted, reordered or inserted behind the log's back.
It exits 0 when the log verifies and 1 when it does not. With RUN, it also
says how many of the log's entries are that run's and whether a signed
checkpoint covers them all (a run signs one when it ends).

"mandate audit key" prints the verifier key of STATE_DIR/audit.key (the
public half of the key that signs checkpoints and receipts), as "mandate
verify --key" takes it; with --pem, the same Ed25519 public key as a PEM
"PUBLIC KEY" block, the form a DSSE or in-toto verifier (or openssl) loads
to check a receipt written with --receipt-format dsse.

With --nats, it verifies a fleet's records instead (see "mandate node"):
every node's copy of its audit log in the fleet's MANDATE_AUDIT stream,
against that node's latest signed checkpoint and its own key. It prints one
line per node and exits 1 when any copy does not verify.

Flags:

	--nats URLS       verify the fleet's copied logs on these NATS servers
	--pem             with key: the public key as PEM
	--run ID          the run to show (default: the last run)
	--all             every run
	--task T          only entries of task T (e.g. t2)
	--denied          only denials
	--format FORMAT   text (default) or json (an array of entries)
	--state-dir DIR   where runs are recorded (default $MANDATE_STATE_DIR,
	                  else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate)

Examples:

	mandate audit --denied
	mandate audit --run 20261129T153000Z-ab12cd --format json
	mandate audit verify
`

func auditPath(state string) string { return filepath.Join(state, "audit.db") }

// auditKey prints the state directory's verifier key, or its public key
// as PEM.
func (e *env) auditKey(stateFlag string, asPEM bool) int {
	dir, err := e.stateDir(stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate audit key: %v\n", err)
		return exitUsage
	}
	if _, err := os.Stat(filepath.Join(dir, audit.KeyFile)); err != nil {
		fmt.Fprintf(e.stderr, "mandate audit key: no key yet in %s (a run creates it)\n", dir)
		return exitUsage
	}
	log, err := audit.OpenReadOnly(auditPath(dir))
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate audit key: %v\n", err)
		return exitUsage
	}
	defer log.Close()
	if !asPEM {
		fmt.Fprintln(e.stdout, log.VerifierKey())
		return exitOK
	}
	b, err := audit.PublicKeyPEM(log.VerifierKey())
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate audit key: %v\n", err)
		return exitUsage
	}
	e.stdout.Write(b)
	return exitOK
}

func runAudit(e *env, args []string) int {
	c := lookupCommand("audit")
	fs := flagSet("audit")
	runID := fs.String("run", "", "")
	all := fs.Bool("all", false, "")
	task := fs.String("task", "", "")
	denied := fs.Bool("denied", false, "")
	format := fs.String("format", "text", "")
	stateFlag := stateDirFlag(fs)
	natsURLs := fs.String("nats", "", "")
	pemKey := fs.Bool("pem", false, "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) >= 1 && pos[0] == "key" {
		if len(pos) > 1 {
			return e.usageError(c, "unexpected argument %q", pos[1])
		}
		return e.auditKey(*stateFlag, *pemKey)
	}
	if *pemKey {
		return e.usageError(c, "--pem goes with key alone: mandate audit key --pem")
	}
	if *natsURLs != "" {
		if len(pos) != 1 || pos[0] != "verify" {
			return e.usageError(c, "--nats goes with verify alone: mandate audit verify --nats URLS")
		}
		return e.verifyFleetAudit(*natsURLs)
	}
	verify := false
	switch {
	case len(pos) >= 1 && pos[0] == "verify" && len(pos) <= 2:
		verify = true
		if len(pos) == 2 {
			*runID = pos[1] // mandate audit verify RUN
		}
	case len(pos) == 1 && *runID == "":
		*runID = pos[0] // mandate audit RUN
	case len(pos) > 0:
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	if *format != "text" && *format != "json" {
		return e.usageError(c, "unknown format %q (formats: text, json)", *format)
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate audit: %v\n", err)
		return exitUsage
	}
	if _, err := os.Stat(auditPath(dir)); err != nil {
		fmt.Fprintf(e.stderr, "mandate audit: no audit log yet in %s\n", dir)
		return exitUsage
	}
	log, err := audit.OpenReadOnly(auditPath(dir))
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate audit: %v\n", err)
		return exitUsage
	}
	defer log.Close()
	ctx := context.Background()
	if verify {
		rep, err := log.Verify(ctx)
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate audit verify: %s: %v\n", auditPath(dir), err)
			if errors.Is(err, audit.ErrTampered) {
				return exitTaskFailed
			}
			return exitUsage
		}
		fmt.Fprintf(e.stdout, "audit log %s verifies: %d entries, %d signed checkpoints (key %s)\n",
			auditPath(dir), rep.Entries, rep.Checkpoints, log.VerifierKey())
		if *runID == "" {
			return exitOK
		}
		// The tree covers every run; say what it proves about this one.
		entries, err := log.Entries(ctx, audit.Filter{Run: *runID})
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate audit verify: %v\n", err)
			return exitUsage
		}
		if len(entries) == 0 {
			fmt.Fprintf(e.stdout, "run %s has no entries in the log (no audited decision and no denial, or no such run)\n", *runID)
			return exitOK
		}
		var signed int64
		if rep.Latest != nil {
			signed = rep.Latest.Size
		}
		first, last := entries[0].Seq, entries[len(entries)-1].Seq
		if last < signed {
			fmt.Fprintf(e.stdout, "run %s: %d entries (seq %d to %d), all covered by the signed checkpoint of size %d\n",
				*runID, len(entries), first, last, signed)
			return exitOK
		}
		unsigned := 0
		for _, en := range entries {
			if en.Seq >= signed {
				unsigned++
			}
		}
		fmt.Fprintf(e.stdout, "run %s: %d entries (seq %d to %d); %d after the last signed checkpoint (size %d): "+
			"they verify against the tree but no signature covers them yet (the run may have been killed before it signed)\n",
			*runID, len(entries), first, last, unsigned, signed)
		return exitOK
	}
	f := audit.Filter{Task: *task, Denied: *denied}
	if !*all {
		f.Run = *runID
		if f.Run == "" {
			r, err := readRecord(ctx, dir, "")
			if err != nil {
				fmt.Fprintf(e.stderr, "mandate audit: %v\n", err)
				return exitUsage
			}
			f.Run = r.Run.ID
		}
	}
	entries, err := log.Entries(ctx, f)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate audit: %v\n", err)
		return exitUsage
	}
	if *format == "json" {
		if entries == nil {
			entries = []audit.Entry{}
		}
		if err := writeJSON(e.stdout, entries); err != nil {
			fmt.Fprintf(e.stderr, "mandate audit: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEQ\tTIME\tTASK\tPRINCIPAL\tCAP\tOP\tDECISION\tREASON")
	for _, en := range entries {
		tm := en.Time
		if len(tm) >= 23 {
			tm = tm[11:23] // the time of day, to the millisecond
		}
		p := kindapi.Printable
		reason := truncate(oneLine(en.Reason), 100)
		if en.Effect != "" { // what the call did, and how it came out
			reason = strings.TrimSuffix(en.Effect+" → "+en.EffectOutcome+"; "+reason, "; ")
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", en.Seq, p(tm), p(en.Task), p(en.Principal),
			p(en.Cap+" "+en.Kind), p(en.Op), p(en.Decision+" "+en.Errno), p(reason))
	}
	w.Flush()
	if len(entries) == 0 {
		fmt.Fprintln(e.stdout, "(no entries)")
	}
	return exitOK
}
