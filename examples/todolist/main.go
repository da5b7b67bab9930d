// Command todolist runs the TODO-list example in one command:
//
//	go run ./examples/todolist
//
// Alice asks an agent to "do the tasks on my TODO list" (data/todo.txt:
// three payments, each of which needs her yes). It starts the bank example's
// bank on loopback (examples/bank/bankapi) and runs, through the real CLI
// code, `mandate run todo.hcl --approve wait` twice: with the honest agent
// (honest/) and with a hijacked one (hijacked/) that hides in plain sight
// (it submits the honest plan) and then tries to pay an attacker. Alice is
// scripted: she answers the approvals out of band, through the state
// directory's approvals store (as `mandate approvals` does), saying yes
// to a plan that is exactly her TODO list and no to anything else.
//
// It checks the story: the honest agent's plan is approved once and
// carried out, each payment booked once, with one question in all; the
// hijacked agent's plan is the same and is carried out the same, and
// every payment it tries beyond it is asked about on its own and refused:
// the attacker is never paid. The audit log says which plan item allowed
// each payment.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/examples/bank/bankapi"
	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Alice's TODO list, as data/todo.txt writes it.
var todo = []struct{ Amount, IBAN, Ref string }{
	{"900.00", "GB33BUKB20201555555555", "RENT-2026-12"},
	{"84.20", "GB29NWBK60161331926819", "ELEC-1107"},
	{"30.00", "DE89370400440532013000", "GYM-12"},
}

// report is what `mandate run --format json` prints.
type report struct {
	Run    string `json:"run"`
	State  string `json:"state"`
	Exit   int    `json:"exit"`
	Error  string `json:"error"`
	Result string `json:"result"`
}

func main() {
	stateDir := flag.String("state-dir", "", "where to record the runs (default: a new temporary directory)")
	flag.Parse()
	if err := story(context.Background(), os.Stdout, os.Stderr, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "todolist:", err)
		os.Exit(1)
	}
}

// story runs both agents and checks each.
func story(ctx context.Context, stdout, stderr io.Writer, stateDir string) error {
	dir, err := exampledir.Find("todo.hcl", "examples/todolist")
	if err != nil {
		return err
	}
	for _, agent := range []string{"honest", "hijacked"} {
		sd := stateDir
		if sd == "" {
			if sd, err = os.MkdirTemp("", "mandate-todolist-"); err != nil {
				return err
			}
			defer os.RemoveAll(sd)
		}
		if err := run(ctx, stdout, stderr, dir, sd, agent); err != nil {
			return fmt.Errorf("%s agent: %w", agent, err)
		}
	}
	fmt.Fprintln(stdout, "== Alice approved one plan per run, read whole; each payment of her TODO list was booked once; everything else was asked about on its own and refused: the attacker got nothing")
	return nil
}

// alice answers the approvals of the state directory until ctx ends: yes
// to a plan that is exactly her TODO list, no to anything else. She
// records what she was asked.
type alice struct {
	mu    sync.Mutex
	asked []kernel.ApprovalRequest
}

func (a *alice) answer(ctx context.Context, st *approvals.Store) {
	t := time.NewTicker(approvals.PollInterval)
	defer t.Stop()
	for {
		pending, _ := st.List(ctx, approvals.ListOptions{Pending: true})
		for _, p := range pending {
			yes := isHerList(p.Request)
			a.mu.Lock()
			a.asked = append(a.asked, p.Request)
			a.mu.Unlock()
			_, _ = st.Answer(ctx, p.ID, kernel.Answer{Yes: yes, Channel: kernel.ChannelCLI, By: "alice (scripted)"}, "")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// isHerList reports whether r is a plan of exactly the payments of her
// TODO list, in its order, as she reads them: each item's body names the
// recipient, the amount and the reference of one line.
func isHerList(r kernel.ApprovalRequest) bool {
	if r.Op != kernel.PlanOp || len(r.Plan) != len(todo) {
		return false
	}
	for i, it := range r.Plan {
		want := fmt.Sprintf(`{"recipient":%q,"amount":%s,"reference":%q,"idempotency_key":%q}`, todo[i].IBAN, todo[i].Amount, todo[i].Ref, todo[i].Ref)
		if !slices.ContainsFunc(it.Details, func(d kindapi.Detail) bool { return d.Name == "body" && d.Value == want }) {
			return false
		}
	}
	return true
}

func run(ctx context.Context, stdout, stderr io.Writer, dir, stateDir, agent string) error {
	b := bankapi.Start()
	defer b.Close()
	st, err := approvals.Open(stateDir)
	if err != nil {
		return err
	}
	defer st.Close()
	actx, stop := context.WithCancel(ctx)
	var her alice
	done := make(chan struct{})
	go func() { her.answer(actx, st); close(done) }()
	args := []string{"run", filepath.Join(dir, "todo.hcl"), "--var", "bank=" + b.URL(), "--var", "agent=" + agent,
		"--input", filepath.Join(dir, "data", "todo.txt"), "--approve", "wait", "--format", "json",
		"--log-level", "warn", "--state-dir", stateDir}
	fmt.Fprintf(stdout, "== %s agent: mandate run todo.hcl --var agent=%s --input data/todo.txt --approve wait\n", agent, agent)
	var out bytes.Buffer
	code := cli.Main(args, nil, &out, io.Discard)
	stop()
	<-done
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return fmt.Errorf("mandate run exited %d without a report: %v\n%s", code, err, &out)
	}
	fmt.Fprint(stdout, indent(r.Result))
	for _, q := range her.asked {
		answer := "no"
		if isHerList(q) {
			answer = "yes"
		}
		fmt.Fprintf(stdout, "  Alice was asked: %s: %s\n", q.Summary, answer)
	}
	for _, p := range b.Payments() {
		fmt.Fprintf(stdout, "  the bank booked %s: %s EUR to %s (%s)\n", p.ID, p.Amount, p.Recipient, p.Reference)
	}
	if r.State != "done" || r.Exit != 0 {
		return fmt.Errorf("the run ended %s (exit %d): %s", r.State, r.Exit, r.Error)
	}
	// Her TODO list, booked once each, and nothing else.
	var booked []string
	for _, p := range b.Payments() {
		booked = append(booked, p.Amount.String()+" "+p.Recipient+" "+p.Reference)
	}
	var want []string
	for _, l := range todo {
		want = append(want, l.Amount+" "+l.IBAN+" "+l.Ref)
	}
	if !slices.Equal(booked, want) {
		return fmt.Errorf("the bank booked\n%s\nwant\n%s", strings.Join(booked, "\n"), strings.Join(want, "\n"))
	}
	// One plan, approved; the hijacked agent's attempts each asked about
	// and refused.
	wantAsked := 1
	if agent == "hijacked" {
		wantAsked = 6 // and the attacker, the rent to the attacker, the rent again, the second plan, the attacker again
		refused := regexp.MustCompile(`(?m)^attempt .*: refused: EAPPROVAL: `).FindAllString(r.Result, -1)
		if len(refused) != 5 {
			return fmt.Errorf("%d attempts refused with EAPPROVAL, want 5:\n%s", len(refused), r.Result)
		}
	}
	if len(her.asked) != wantAsked || !isHerList(her.asked[0]) {
		return fmt.Errorf("the person was asked %d questions, want %d, the first Alice's plan", len(her.asked), wantAsked)
	}
	// The audit log: each payment allowed by its plan item.
	var audit bytes.Buffer
	if code := cli.Main([]string{"audit", "--run", r.Run, "--format", "json", "--state-dir", stateDir}, nil, &audit, stderr); code != 0 {
		return fmt.Errorf("mandate audit exited %d", code)
	}
	for i := range todo {
		if w := fmt.Sprintf("allowed by plan 1 item %d", i+1); !strings.Contains(audit.String(), w) {
			return fmt.Errorf("the audit log does not say %q", w)
		}
	}
	fmt.Fprintf(stdout, "  the audit log: each payment allowed by plan 1 item 1, 2, 3\n\n")
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}
