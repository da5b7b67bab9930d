package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/internal/graphview"
	"github.com/mandatevm/mandate/internal/webui"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

const uiHelp = `Usage: mandate ui [RUN | last] [--addr 127.0.0.1:0] [--state-dir DIR] [--cache-dir DIR]
       mandate ui [RUN | last] --nats URLS [--addr 127.0.0.1:0] [--cache-dir DIR]

Serves a local web view of the recorded runs, and the page where a person
answers the pending approvals, and prints its URL:
the runs list (filter by principal, state, denials); a run's page with its
task tree, each task's capabilities and their derivation from the
manifest's grants, labels and clearances, every denial and flow with the
kernel's reason, the tasks' outputs, the run's audit entries with the
verdict of verifying the whole log (as "mandate audit verify"), and the
capability graph; select a capability for its scope, constraints,
derivation path and every use and denial made on it. A run in progress
(or an MCP session) updates live. With RUN (an id, or "last"), the URL
printed opens that run's page.

With --nats, it serves a fleet's runs instead (see "mandate node"),
read-only: the runs its nodes started, newest first, with the node each
ran on (the list is read again every 5 s while a page is open), and each
run's page from the record its node copied to the fleet when the run
ended (a run still running or lost with its node has none yet: its page
says where its record is). Such a UI has no approvals (a node asks no
person), no MCP clients and no audit log of its own: the run's audit
entries are in its node's log and the fleet's copy ("mandate audit verify
--nats" checks them). RUN may also be a submission's id.

Approvals: /approvals lists the uses of a capability that wait for a
person's yes (mandate run --approve wait, mandate mcp serve), and
/approvals/ID shows one whole (every part of the effect, its digest, the
reasons, who asks) with Approve and Refuse buttons. It writes
STATE/ui.json (its address and pid, removed when it stops) so that a
waiting process can print the page's URL; that URL carries no token:
open the URL mandate ui printed once in the browser first.

Open the URL it prints: it carries a random token (256 bits), which the
first request trades for a cookie (HttpOnly, SameSite=Strict) before
redirecting to the same URL without it. Nothing is served without the
token or the cookie. mandate ui stops on Ctrl-C.

Security: it listens on loopback only (--addr must be, or resolve only to,
a loopback address; to look from another machine, forward the port, e.g.
ssh -L PORT:127.0.0.1:PORT, with the same port number); it answers only to
requests whose Host is its own address or localhost:PORT (a DNS name
rebound to 127.0.0.1 is refused); it serves GET and HEAD only, but for
the POST of an approval's answer, which must also carry its own Origin,
a same-origin fetch's headers, JSON and the approval's one-time nonce;
every response carries a strict Content-Security-Policy (scripts and
styles from itself only, nothing inline, no forms), nosniff, no referrer
and no caching. It opens the run store and the audit log read-only; it
writes only ui.json and the answers in approvals.db (opened once a
waiting process made it): a state directory that cannot be written is
shown whole. What guests wrote
(capability names, scope values, reasons, results, output) is shown as
text, control characters escaped.

Flags:

	--addr HOST:PORT  where to listen (default 127.0.0.1:0: a free port)
	--nats URLS       serve a fleet's runs, from these NATS servers
	                  (comma-separated), instead of a state directory's
	--state-dir DIR   where runs are recorded (default $MANDATE_STATE_DIR,
	                  else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate)
	--cache-dir DIR   cache root, for the graph pictures' compiled Graphviz
	                  (DIR/graphviz); default $MANDATE_CACHE_DIR, else the
	                  user cache directory + /mandate

Examples:

	mandate ui
	mandate ui last
	mandate ui --addr 127.0.0.1:8765 --state-dir ./state
	mandate ui --nats nats://127.0.0.1:4222
`

func runUI(e *env, args []string) int {
	c := lookupCommand("ui")
	fs := flagSet("ui")
	addr := fs.String("addr", "127.0.0.1:0", "")
	stateFlag := stateDirFlag(fs)
	cacheFlag := fs.String("cache-dir", "", "")
	natsURLs := fs.String("nats", "", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	run := ""
	switch {
	case len(pos) == 1:
		run = pos[0]
		if run != "last" && !runstore.ValidRunID(run) {
			return e.usageError(c, "%q is not a run id (run ids look like 20261129T153000Z-ab12cd)", truncate(run, 64))
		}
	case len(pos) > 1:
		return e.usageError(c, "unexpected argument %q", pos[1])
	}
	if *natsURLs != "" {
		if *stateFlag != "" {
			return e.usageError(c, "--nats and --state-dir: a fleet's runs are read from the fleet, not a state directory")
		}
		return e.serveFleetUI(*natsURLs, *addr, *cacheFlag, run)
	}
	dir, err := e.stateDir(*stateFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
		return exitUsage
	}
	// Without a cache root the pictures are drawn all the same; Graphviz is
	// compiled again by each process.
	cache, err := e.cacheDir(*cacheFlag)
	if err != nil {
		cache = ""
	}
	// The UI creates nothing: a state directory not made yet is shown
	// empty until a run makes it.
	if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(e.stderr, "mandate ui: warning: %s does not exist yet; runs recorded there will show as they start\n", kindapi.Printable(dir))
	} else if err != nil || !fi.IsDir() {
		fmt.Fprintf(e.stderr, "mandate ui: state directory %s: %s\n", kindapi.Printable(dir), statProblem(err))
		return exitUsage
	}
	ln, s, token, ok := e.startUI(*addr, webui.Options{StateDir: dir, Graph: uiGraph(cache)})
	if !ok {
		return exitUsage
	}
	// Where a process waiting for an approval points the person.
	if unpublish, err := webui.Publish(dir, ln.Addr().String()); err != nil {
		fmt.Fprintf(e.stderr, "mandate ui: note: its address is not published in the state directory (%v): "+
			"waiting runs will not link to their approval's page\n", kindapi.EscapeText(err.Error()))
	} else {
		defer unpublish()
	}
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return e.serveUI(ctx, ln, s, token, run, "the runs and approvals in "+kindapi.Printable(dir))
}

// serveFleetUI is mandate ui --nats: the UI over a fleet's runs,
// read-only.
func (e *env) serveFleetUI(urls, addr, cacheFlag, run string) int {
	cache, err := e.cacheDir(cacheFlag)
	if err != nil {
		cache = ""
	}
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	nc, f, err := connectFleet(cctx, urls, "mandate ui", 1)
	cancel()
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	src := newFleetRuns(f, urls)
	// A run named on the command line must be one: say so now rather
	// than on a page.
	if run != "" {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		st, err := src.find(cctx, run)
		cancel()
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
			return exitUsage
		}
		if run != "last" {
			if st.RunID == "" {
				fmt.Fprintf(e.stderr, "mandate ui: submission %s has no run yet (it is %s)\n", st.ID, st.State)
				return exitUsage
			}
			run = st.RunID
		}
	}
	ln, s, token, ok := e.startUI(addr, webui.Options{Runs: src, Graph: uiGraph(cache)})
	if !ok {
		return exitUsage
	}
	return e.serveUI(ctx, ln, s, token, run, "the runs of "+src.Name()+", read-only")
}

// startUI listens on addr and makes the UI's server with opts, its token,
// address and logger filled in (for a state directory and for a fleet);
// false when it cannot, said on stderr.
func (e *env) startUI(addr string, opts webui.Options) (net.Listener, *webui.Server, string, bool) {
	ln, err := webui.Listen(addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
		return nil, nil, "", false
	}
	token, err := webui.NewToken()
	if err != nil {
		ln.Close()
		fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
		return nil, nil, "", false
	}
	opts.Token, opts.Addr = token, ln.Addr().String()
	opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "mandate ui", Level: hclog.Warn, Output: e.stderr})
	s, err := webui.New(opts)
	if err != nil {
		ln.Close()
		fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
		return nil, nil, "", false
	}
	return ln, s, token, true
}

// serveUI prints the URL of run's page (the runs list without one) and
// serves until ctx ends; what says what is served.
func (e *env) serveUI(ctx context.Context, ln net.Listener, s *webui.Server, token, run, what string) int {
	page := "/"
	if run != "" {
		page = "/runs/" + url.PathEscape(run)
	}
	fmt.Fprintf(e.stderr, "mandate ui: %s; open (Ctrl-C stops):\n", what)
	fmt.Fprintf(e.stdout, "http://%s%s?token=%s\n", ln.Addr(), page, token)
	if err := s.Serve(ctx, ln); err != nil {
		fmt.Fprintf(e.stderr, "mandate ui: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// uiGraph draws a run's graph picture for the UI with Graphviz in
// WebAssembly, its compiled code kept in CACHE/graphviz as "mandate graph
// --format svg" keeps it.
func uiGraph(cache string) func(context.Context, *runstore.Record) ([]byte, error) {
	var opts graphview.Options
	if cache != "" {
		opts.CacheDir = filepath.Join(cache, "graphviz")
	}
	return func(ctx context.Context, rec *runstore.Record) ([]byte, error) {
		return graphview.SVG(ctx, rec, opts)
	}
}

func statProblem(err error) string {
	if err == nil {
		return "not a directory"
	}
	return err.Error()
}
