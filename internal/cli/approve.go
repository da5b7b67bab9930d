package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mandatevm/mandate/kernel"
)

// Values of mandate run --approve.
const (
	approvePrompt = "prompt" // ask on the terminal; deny when there is none
	approveYes    = "yes"    // approve every request (scripts, demos)
	approveNo     = "no"     // deny every request
)

// newApprover returns the kernel.Approver for an --approve value. The
// prompt reads the controlling terminal (/dev/tty), never standard input,
// which may be the task's input; with no terminal (CI, a pipe) every
// request is denied.
func newApprover(mode string, stderr io.Writer) (kernel.Approver, error) {
	switch mode {
	case approveYes:
		return kernel.ApproverFunc(func(_ context.Context, r kernel.ApprovalRequest) (bool, error) {
			fmt.Fprintf(stderr, "mandate: approved by --approve=yes:\n%s", indentLines(r.Text()))
			return true, nil
		}), nil
	case approveNo:
		return kernel.DenyAll, nil
	case approvePrompt, "":
		return &ttyApprover{stderr: stderr}, nil
	}
	return nil, fmt.Errorf("--approve must be prompt, yes or no, not %q", mode)
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

// ttyApprover asks a person on the terminal, one question at a time.
type ttyApprover struct {
	mu     sync.Mutex
	stderr io.Writer
}

func (a *ttyApprover) Approve(ctx context.Context, r kernel.ApprovalRequest) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(a.stderr, "mandate: denied (no terminal to ask; pass --approve=yes to allow):\n%s", indentLines(r.Text()))
		return false, nil
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
		return false, ctx.Err()
	case s := <-answer:
		return s == "y" || s == "yes", nil
	}
}
