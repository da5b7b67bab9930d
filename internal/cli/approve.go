package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/internal/webui"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Values of mandate run --approve.
const (
	approvePrompt = "prompt" // ask on the terminal; deny when there is none
	approveYes    = "yes"    // approve every request (scripts, demos)
	approveNo     = "no"     // deny every request
	approveWait   = "wait"   // record it in STATE/approvals.db and wait for the person's answer
)

// newApprover returns the kernel.Approver for an --approve value. The
// prompt reads the controlling terminal (/dev/tty), never standard input,
// which may be the task's input; with no terminal (CI, a pipe) every
// request is denied.
func newApprover(mode string, stderr io.Writer) (kernel.Approver, error) {
	switch mode {
	case approveYes:
		return fixedApprover{yes: true, stderr: stderr}, nil
	case approveNo:
		return fixedApprover{}, nil
	case approvePrompt, "":
		return &ttyApprover{stderr: stderr}, nil
	case approveWait:
		return nil, errors.New("--approve wait: this command does not wait for approvals")
	}
	return nil, fmt.Errorf("--approve must be prompt, yes or no, not %q", mode)
}

// newRunApprover is newApprover for mandate run, with wait: an
// approvals.Approver on the state directory's approvals store, which
// says on stderr where to answer. close closes what it opened.
func newRunApprover(mode string, stderr io.Writer, stateDir, waiter string) (ap kernel.Approver, wait *approvals.Approver, close func(), err error) {
	if mode != approveWait {
		ap, err = newApprover(mode, stderr)
		if err != nil {
			err = fmt.Errorf("--approve must be prompt, wait, yes or no, not %q", mode)
		}
		return ap, nil, func() {}, err
	}
	st, err := approvals.Open(stateDir)
	if err != nil {
		return nil, nil, nil, err
	}
	w := &approvals.Approver{Store: st, Waiter: waiter, Asked: func(_ context.Context, a approvals.Approval) {
		askedWhere(stderr, stateDir, a)
	}}
	return w, w, func() { st.Close() }, nil
}

// askedWhere tells the person, on stderr, what waits for their answer and
// where to give it.
func askedWhere(stderr io.Writer, stateDir string, a approvals.Approval) {
	fmt.Fprintf(stderr, "mandate: waiting for a person's answer (until %s) to approval %s:\n%s",
		a.Expires.Local().Format(time.TimeOnly), a.ID, indentLines(a.Request.Text()))
	if u, ok := webui.ApprovalURL(stateDir, a.ID); ok {
		fmt.Fprintf(stderr, "  answer on the page %s (in the browser where mandate ui's URL was opened)\n", u)
	}
	state := ""
	if stateDir != "" {
		state = " --state-dir " + shellQuote(stateDir)
	}
	fmt.Fprintf(stderr, "  or in a terminal: mandate approvals yes %s%s (no: mandate approvals no %s%s)\n", a.ID, state, a.ID, state)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(kindapi.Printable(s), "'", `'\''`) + "'"
}

// indentLines indents each line of an approval's text (already escaped by
// kernel.ApprovalRequest.Text) under the "mandate:" line.
func indentLines(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
	return b.String()
}

// fixedApprover gives the answer --approve named, on ChannelFlag.
type fixedApprover struct {
	yes    bool
	stderr io.Writer
}

func (a fixedApprover) Approve(_ context.Context, r kernel.ApprovalRequest) (kernel.Answer, error) {
	if a.yes {
		fmt.Fprintf(a.stderr, "mandate: approved by --approve=yes:\n%s", indentLines(r.Text()))
		return kernel.Answer{Yes: true, Channel: kernel.ChannelFlag, By: "--approve=yes"}, nil
	}
	return kernel.Answer{Channel: kernel.ChannelFlag, By: "--approve=no"}, nil
}

// ttyApprover asks a person on the terminal, one question at a time.
type ttyApprover struct {
	mu     sync.Mutex
	stderr io.Writer
}

func (a *ttyApprover) Approve(ctx context.Context, r kernel.ApprovalRequest) (kernel.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(a.stderr, "mandate: denied (no terminal to ask; pass --approve=yes to allow):\n%s", indentLines(r.Text()))
		return kernel.Answer{Channel: kernel.ChannelNone, By: "no terminal to ask"}, nil
	}
	defer tty.Close()
	fmt.Fprintf(tty, "\nmandate: %sApprove? [y/N] ", r.Text())
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(tty).ReadString('\n')
		answer <- strings.TrimSpace(strings.ToLower(line))
	}()
	select {
	case <-ctx.Done():
		return kernel.Answer{}, ctx.Err()
	case s := <-answer:
		return kernel.Answer{Yes: s == "y" || s == "yes", Channel: kernel.ChannelTerminal, By: personAt(ttyName())}, nil
	}
}

// personAt names the person answering at terminal tty, for the audit
// log: the user this process runs as, and the terminal ("user alice (uid
// 1000) on /dev/pts/3").
func personAt(tty string) string {
	name := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		name = "user " + u.Username + " (" + name + ")"
	}
	return name + " on " + tty
}

// ttyName names the terminal the command runs on: the first of its
// standard streams that is one, else the controlling terminal.
func ttyName() string {
	for fd := range 3 {
		if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil &&
			(strings.HasPrefix(p, "/dev/pts/") || strings.HasPrefix(p, "/dev/tty")) {
			return p
		}
	}
	return "/dev/tty"
}
