package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

const approvalsHelp = `Usage: mandate approvals [list] [--all] [--json] [--state-dir DIR]
       mandate approvals show ID [--json] [--state-dir DIR]
       mandate approvals yes ID [--state-dir DIR]
       mandate approvals no ID [--state-dir DIR]

Lists and answers the approvals waiting in a state directory: uses of a
capability that need a person's yes (a payment above its approve_above, a
call matching approve_when), asked by a mandate run --approve wait or a
mandate mcp serve that waits for the answer. Answer from another shell,
or on the approvals page of mandate ui.

	list   the pending approvals (the default); --all: answered ones too
	show   one approval whole: every part of the effect uncut (escaped, so
	       nothing a guest wrote acts on the terminal), its digest, the
	       reasons, who waits for it, the run, its expiry, its state
	yes    approve it, once confirmed on the controlling terminal
	       (/dev/tty): the request is shown there and "Approve? [y/N]"
	       asked; with no terminal it refuses to approve (a model's tools
	       usually run without one: a yes needs the person)
	no     refuse it (no terminal needed)

An approval is answered once: a second answer, or one to an approval that
expired (a refusal, after 10 minutes by default) or whose waiting process
ended, is an error naming what happened. The answer's channel is "cli" and
it is recorded with the user, uid, terminal and pid; the audit log
records it with the question (mandate audit --run RUN).

Flags:

	--all             list answered, expired and withdrawn approvals too
	--json            list or show as JSON (the request whole)
	--state-dir DIR   the state directory (default $MANDATE_STATE_DIR,
	                  else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate)

Exit codes: 0 done; 1 the approval is unknown, not pending, or a yes
could not be confirmed (nothing was answered); 2 usage errors.

Examples:

	mandate approvals
	mandate approvals show 3f2a9c0d41b7e865
	mandate approvals yes 3f2a9c0d41b7e865
	mandate approvals no 3f2a9c0d41b7e865
`

func runApprovals(e *env, args []string) int {
	c := lookupCommand("approvals")
	fs := flagSet("approvals")
	all := fs.Bool("all", false, "")
	asJSON := fs.Bool("json", false, "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	id := ""
	switch sub {
	case "list":
		if len(pos) > 0 {
			return e.usageError(c, "unexpected argument %q", truncate(pos[0], 64))
		}
	case "show", "yes", "no":
		if id, code, ok = e.oneArg(c, pos, "the approval's ID"); !ok {
			return code
		}
		if !approvals.ValidID(id) {
			return e.usageError(c, "%q is not an approval ID (16 hex characters, as mandate approvals lists them)", truncate(kindapi.Printable(id), 64))
		}
		if *all || *asJSON && sub != "show" {
			return e.usageError(c, "--all and --json are for list and show")
		}
	default:
		return e.usageError(c, "unknown subcommand %q (list, show, yes or no)", truncate(kindapi.Printable(sub), 64))
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate approvals: %v\n", err)
		return exitUsage
	}
	ctx := e.context()
	// Reading creates nothing: no file is no approval yet.
	if _, err := os.Stat(filepath.Join(dir, approvals.FileName)); errors.Is(err, os.ErrNotExist) {
		if sub == "list" {
			if *asJSON {
				fmt.Fprintln(e.stdout, "[]")
			} else {
				fmt.Fprintf(e.stderr, "mandate approvals: no approval was asked in %s\n", kindapi.Printable(dir))
			}
			return exitOK
		}
		fmt.Fprintf(e.stderr, "mandate approvals: no approval %s: none was asked in %s\n", id, kindapi.Printable(dir))
		return exitTaskFailed
	}
	st, err := approvals.Open(dir)
	if err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	defer st.Close()
	switch sub {
	case "list":
		return e.approvalsList(ctx, st, *all, *asJSON)
	case "show":
		return e.approvalShow(ctx, st, id, *asJSON)
	}
	return e.approvalAnswer(ctx, st, id, sub == "yes")
}

func (e *env) approvalsList(ctx context.Context, st *approvals.Store, all, asJSON bool) int {
	l, err := st.List(ctx, approvals.ListOptions{Pending: !all})
	if err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	if asJSON {
		if l == nil {
			l = []approvals.Approval{}
		}
		return e.writeJSONOut(l)
	}
	if len(l) == 0 {
		what := "pending"
		if all {
			what = "recorded"
		}
		fmt.Fprintf(e.stderr, "mandate approvals: no approval %s\n", what)
		return exitOK
	}
	for _, a := range l {
		r := a.Request
		fmt.Fprintf(e.stdout, "%s  %-9s  %s\n", a.ID, a.State, kindapi.Printable(r.Summary))
		fmt.Fprintf(e.stdout, "    task %s acting for %s, %s %q; asked by %s", kindapi.Printable(r.Task), kindapi.Printable(r.Principal),
			kindapi.Printable(r.Kind), kindapi.Printable(r.CapName), kindapi.Printable(a.Waiter))
		if a.Run != "" {
			fmt.Fprintf(e.stdout, " in run %s", kindapi.Printable(a.Run))
		}
		fmt.Fprintf(e.stdout, "\n    %s\n", approvalStatus(a))
	}
	return exitOK
}

// approvalStatus says, in a line, where a stands.
func approvalStatus(a approvals.Approval) string {
	switch a.State {
	case approvals.StatePending:
		return fmt.Sprintf("waiting until %s (%s left)", a.Expires.Local().Format(time.DateTime), time.Until(a.Expires).Round(time.Second))
	case approvals.StateWithdrawn:
		return "withdrawn: " + kindapi.Printable(a.Note)
	}
	s := fmt.Sprintf("%s at %s on channel %s", a.State, a.Answered.Local().Format(time.DateTime), kindapi.Printable(a.Channel))
	if a.By != "" {
		s += " by " + kindapi.Printable(a.By)
	}
	return s
}

func (e *env) writeJSONOut(v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	return exitOK
}

func (e *env) approvalShow(ctx context.Context, st *approvals.Store, id string, asJSON bool) int {
	a, err := st.Get(ctx, id)
	if err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	if asJSON {
		return e.writeJSONOut(a)
	}
	r := a.Request
	w := e.stdout
	fmt.Fprintf(w, "approval %s: %s\n", a.ID, approvalStatus(a))
	fmt.Fprintf(w, "asked by  %s (pid %d)", kindapi.Printable(a.Waiter), a.PID)
	if a.Run != "" {
		fmt.Fprintf(w, " in run %s", kindapi.Printable(a.Run))
	}
	fmt.Fprintf(w, ", at %s, expires %s\n", a.Created.Local().Format(time.DateTime), a.Expires.Local().Format(time.DateTime))
	fmt.Fprintf(w, "task      %s acting for %s (module %s)\n", kindapi.Printable(r.Task), kindapi.Printable(r.Principal), kindapi.Printable(r.Module))
	fmt.Fprintf(w, "asks to   %s\n", kindapi.Printable(r.Summary))
	fmt.Fprintf(w, "with      %s %q (%s), operation %s\n", kindapi.Printable(r.Kind), kindapi.Printable(r.CapName), kindapi.Printable(r.Cap), kindapi.Printable(r.Op))
	for _, why := range r.Reasons {
		fmt.Fprintf(w, "because   %s\n", kindapi.Printable(why))
	}
	fmt.Fprintf(w, "effect    %s (a yes is to this digest of the whole effect below)\n", kindapi.Printable(r.Digest))
	for _, d := range r.Details {
		fmt.Fprintf(w, "\n--- %s (%d bytes, whole) ---\n%s\n", kindapi.Printable(d.Name), len(d.Value), kindapi.EscapeText(d.Value))
	}
	return exitOK
}

// approvalAnswer answers approval id: no at once, yes once the person
// confirmed it on the controlling terminal.
func (e *env) approvalAnswer(ctx context.Context, st *approvals.Store, id string, yes bool) int {
	a, err := st.Get(ctx, id)
	if err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	if !a.Pending() {
		e.errorf("approval %s was not answered: %s", id, approvalStatus(a))
		return exitTaskFailed
	}
	tty := "no terminal"
	if yes {
		f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			e.errorf("approval %s was not approved: there is no terminal to confirm the yes on (/dev/tty: %v). "+
				"A yes must come from the person, not from a program: run mandate approvals yes in a terminal, "+
				"or answer on mandate ui's approvals page", id, err)
			return exitTaskFailed
		}
		defer f.Close()
		tty = ttyName()
		ok, err := confirmYes(ctx, f, a)
		if err != nil {
			e.errorf("approval %s was not approved: %v", id, err)
			return exitTaskFailed
		}
		if !ok {
			fmt.Fprintf(e.stderr, "mandate approvals: approval %s was not approved; it is still pending (mandate approvals no %s refuses it)\n", id, id)
			return exitTaskFailed
		}
	}
	got, err := st.Answer(ctx, id, kernel.Answer{Yes: yes, Channel: kernel.ChannelCLI, By: personAt(tty) + ", mandate approvals pid " + strconv.Itoa(os.Getpid())}, "")
	if err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	fmt.Fprintf(e.stderr, "mandate approvals: %s %s: %s\n", got.State, got.ID, kindapi.Printable(got.Request.Summary))
	return exitOK
}

// confirmYes shows a's request on the terminal tty and asks the person;
// true on y or yes.
func confirmYes(ctx context.Context, tty io.ReadWriter, a approvals.Approval) (bool, error) {
	who := kindapi.Printable(a.Waiter)
	if a.Run != "" {
		who += " in run " + kindapi.Printable(a.Run)
	}
	// Text escapes every part, cuts what is too long to read here (the
	// whole: mandate approvals show) and ends with the effect's digest.
	if _, err := fmt.Fprintf(tty, "\nmandate: approval %s, asked by %s (pid %d):\n%sApprove? [y/N] ", a.ID, who, a.PID, indentLines(a.Request.Text())); err != nil {
		return false, err
	}
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(tty).ReadString('\n')
		answer <- strings.TrimSpace(strings.ToLower(line))
	}()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case s := <-answer:
		return s == "y" || s == "yes", nil
	}
}
