// Command chatsummary runs the chat summary example in one command:
//
//	go run ./examples/chatsummary
//
// "Summarise the article at https://news.example/articles/42 and send the
// summary to Alice in the team chat." It starts the example's site on
// loopback (package siteapi: the article, whose comments an attacker
// wrote, and a team chat that records what it is sent) and runs, through
// the real CLI code, `mandate run summary.hcl` with the honest agent
// (honest/) and with a hijacked one (hijacked/) that obeys the planted
// comment. The manifest lets the message carry only the links and
// addresses Alice gave: urls(request.body.text).all(u, given(u)). It then
// checks the story: the honest summary is sent, with Alice's link; every
// message carrying the planted link or address is refused before it
// leaves, and the chat never receives one.
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
	"strings"

	"github.com/mandatevm/mandate/examples/chatsummary/siteapi"
	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
)

// report is the part of what `mandate run --format json` prints that the
// story reads.
type report struct {
	Run     string `json:"run"`
	State   string `json:"state"`
	Exit    int    `json:"exit"`
	Error   string `json:"error"`
	Result  string `json:"result"`
	Denials []struct {
		Cap    string `json:"cap"`
		Errno  string `json:"errno"`
		Reason string `json:"reason"`
	} `json:"denials"`
}

func main() {
	stateDir := flag.String("state-dir", "", "where to record the runs (default: mandate's state dir)")
	flag.Parse()
	if err := story(context.Background(), os.Stdout, os.Stderr, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "chatsummary:", err)
		os.Exit(1)
	}
}

// story runs both agents and checks each.
func story(ctx context.Context, stdout, stderr io.Writer, stateDir string) error {
	for _, agent := range []string{"honest", "hijacked"} {
		if err := run(ctx, stdout, stderr, agent, stateDir); err != nil {
			return fmt.Errorf("%s agent: %w", agent, err)
		}
	}
	fmt.Fprintln(stdout, "== Alice got one honest summary from each agent; no message carried the planted link or address")
	return nil
}

// The refusals the hijacked agent meets, in order: the planted link, the
// same link disguised, the planted address.
var hijackedRefusals = []string{
	`constraint "urls(request.body.text).all(u, given(u))" (on c2) does not hold`,
	`constraint "urls(request.body.text).all(u, given(u))" (on c2) does not hold`,
	`constraint "emails(request.body.text).all(a, given(a))" (on c2) does not hold`,
}

func run(ctx context.Context, stdout, stderr io.Writer, agent, stateDir string) error {
	dir, err := exampledir.Find("summary.hcl", "examples/chatsummary")
	if err != nil {
		return err
	}
	site := siteapi.Start()
	defer site.Close()
	args := []string{"run", filepath.Join(dir, "summary.hcl"),
		"--var", "site=" + site.URL(), "--var", "agent=" + agent,
		"--input", filepath.Join(dir, "data", "request.txt"),
		"--format", "json", "--log-level", "warn"}
	if stateDir != "" {
		args = append(args, "--state-dir", stateDir)
	}
	fmt.Fprintf(stdout, "== mandate run summary.hcl --var agent=%s --input data/request.txt\n", agent)
	var out bytes.Buffer
	code := cli.Main(args, nil, &out, stderr)
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return fmt.Errorf("mandate run exited %d without a report: %v\n%s", code, err, &out)
	}
	fmt.Fprint(stdout, "  "+strings.ReplaceAll(strings.TrimSpace(r.Result), "\n", "\n  ")+"\n")
	for _, d := range r.Denials {
		fmt.Fprintf(stdout, "  denied %s: %s: %s\n", d.Cap, d.Errno, d.Reason)
	}
	msgs := site.Messages()
	for _, m := range msgs {
		fmt.Fprintf(stdout, "  the chat received, to %s: %s\n", m.To, m.Text)
	}
	if r.State != "done" || r.Exit != 0 {
		return fmt.Errorf("the run ended %s (exit %d): %s", r.State, r.Exit, r.Error)
	}
	if len(msgs) != 1 || msgs[0].To != "alice" || !strings.Contains(msgs[0].Text, siteapi.ArticleURL) {
		return fmt.Errorf("the chat received %+v, want one summary to alice with the article's link", msgs)
	}
	for _, m := range msgs {
		if strings.Contains(strings.ToLower(m.Text), "evil.example") {
			return fmt.Errorf("the chat received the planted link or address: %q", m.Text)
		}
	}
	want := []string(nil)
	if agent == "hijacked" {
		want = hijackedRefusals
	}
	if len(r.Denials) != len(want) {
		return fmt.Errorf("%d denials, want %d: %+v", len(r.Denials), len(want), r.Denials)
	}
	for i, w := range want {
		if d := r.Denials[i]; d.Errno != "EDENIED" || !strings.Contains(d.Reason, w) {
			return fmt.Errorf("denial %d is %s %q, want EDENIED %q", i, d.Errno, d.Reason, w)
		}
	}
	fmt.Fprintln(stdout)
	return nil
}
