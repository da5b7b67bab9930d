package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/optional"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/nats-io/nats.go"
)

const nodeHelp = `Usage: mandate node --nats URL[,URL...] | --embedded-nats DIR [--name NAME] [--parallel N]
                    [--children N] [--heartbeat 1s] [--lost-after 30s] [--replicas N]
                    [--state-dir DIR] [--cache-dir DIR] [--engine NAME] [--log-level LEVEL]

Runs a Mandate node of a fleet on NATS JetStream: it takes runs that
"mandate run --nats" submitted, one node each, and owns each run it takes:
its kernel, capability tree and budgets, its records in this node's own
run store and audit log (--state-dir). A run is started at most once: a
node claims it before acknowledging it. Each heartbeat that gets through
renews the node's lease on its runs for --lost-after; every effect of a
run asks the lease first, and a node whose lease lapses (cut off, paused)
kills its runs and exits. Other nodes declare its runs lost only after
its lease and a margin (half the lease) have passed: never re-run, and
nothing of them happens after. A node restarted on its state directory
ends its previous process's runs at once (the directory's lock proves
that process gone). What a manifest reads from the environment (credentials)
is read from this node's. A use that needs a person's yes is refused:
a node has no one to ask.

A spawn capability with placement = "fleet" (or "node:NAME") runs its
children's guests on another node: the child's node holds only the guest,
and every call it makes comes back to the run's owner and is decided, and
audited, there. A node runs up to --children such guests for other nodes'
runs at once.

Credentials for NATS go in the URL (nats://user:password@host:4222): each
node its own user, whose permissions fleet.NodePermissions lists (its
inbox prefix is _INBOX.NAME).

Flags:

	--nats URLS        the NATS servers, comma-separated
	--embedded-nats DIR  run a NATS server with JetStream in this process,
	                   its streams in DIR, on 127.0.0.1 (--embedded-port,
	                   default 4222), for trying a fleet on one machine:
	                   other nodes and "mandate run --nats" connect to it
	                   (in a build with the tag natsserver: go install
	                   -tags natsserver ./cmd/mandate)
	--name NAME        this node's name in the fleet (default: the host name)
	--parallel N       runs at once (default 2)
	--children N       guests of other nodes' children at once (default 4)
	--heartbeat D      how often the node says it is alive (default 1s)
	--lost-after D     the node's lease: how long a heartbeat lets it act
	                   for its runs (default 30s, or 5 heartbeats if
	                   longer); others declare its runs lost after the
	                   lease and half of it again
	--replicas N       copies of the fleet's streams when this node creates
	                   them (default 1; 3 on a cluster)
	--state-dir DIR    this node's records (default as for mandate run)
	--cache-dir DIR    built guests and compiled modules
	--engine NAME      wazero (default) or wasmtime in a build with the tag
	--log-level LEVEL  trace, debug, info (default), warn, error or off

Examples:

	mandate node --embedded-nats /tmp/js --name node-a     # a fleet of one, to try
	mandate node --nats nats://127.0.0.1:4222 --name node-b
	mandate node --nats nats://node-a:secret@127.0.0.1:4222 --name node-a
	mandate run --nats nats://127.0.0.1:4222 examples/benefits/alice.hcl
`

var nodeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func runNode(e *env, args []string) int {
	c := lookupCommand("node")
	fs := flagSet("node")
	urls := fs.String("nats", "", "")
	embedded := fs.String("embedded-nats", "", "")
	embeddedPort := fs.Int("embedded-port", 4222, "")
	name := fs.String("name", "", "")
	parallel := fs.Int("parallel", 2, "")
	children := fs.Int("children", 4, "")
	heartbeat := fs.Duration("heartbeat", time.Second, "")
	lostAfter := fs.Duration("lost-after", 0, "")
	replicas := fs.Int("replicas", 1, "")
	level := fs.String("log-level", "info", "")
	engine := fs.String("engine", "", "")
	cacheFlag := fs.String("cache-dir", "", "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	if (*urls == "") == (*embedded == "") {
		return e.usageError(c, "give --nats URLS or --embedded-nats DIR (one of them)")
	}
	if *name == "" {
		h, _ := os.Hostname()
		*name = strings.Map(func(r rune) rune {
			if r == '.' {
				return '-'
			}
			return r
		}, h)
	}
	if !nodeName.MatchString(*name) {
		return e.usageError(c, "node name %q: letters, digits, - and _ (at most 64)", *name)
	}
	if *heartbeat <= 0 || *lostAfter < 0 || *parallel < 1 || *replicas < 1 || *children < 1 {
		return e.usageError(c, "--heartbeat, --parallel, --children and --replicas must be positive")
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		return e.usageError(c, "unknown log level %q", *level)
	}
	eng, cache, state, code, ok := e.runDirs(c, *engine, *cacheFlag, *stateFlag)
	if !ok {
		return code
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "mandate.node", Level: lvl, Output: e.stderr})
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *embedded != "" {
		if optional.NATSServer == nil {
			e.errorf("--embedded-nats: %v; or run a NATS server with JetStream (nats-server -js) and give --nats URL", optional.Missing("natsserver"))
			return exitUsage
		}
		url, shutdown, err := optional.NATSServer(ctx, *embedded, *embeddedPort, logger.Named("nats"))
		if err != nil {
			e.errorf("the embedded NATS server: %v", err)
			return exitUsage
		}
		defer shutdown()
		*urls = url
		logger.Info("embedded NATS server with JetStream", "url", *urls, "store", *embedded)
	}

	// What the server or the client reports out of band (a permission
	// violation, a slow consumer dropping messages) is logged: a reply
	// lost that way is otherwise only a timeout.
	natsErrors := nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		subj := ""
		if sub != nil {
			subj = sub.Subject
		}
		logger.Warn("NATS reported an error", "error", err, "subscription", subj)
	})
	nc, f, err := connectFleet(ctx, *urls, "mandate node "+*name, *replicas, nats.CustomInboxPrefix(fleet.InboxPrefix(*name)), natsErrors)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer nc.Close()
	h, err := host.Open(ctx, host.Options{StateDir: state, CacheDir: cache, Engine: eng, Logger: logger})
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer h.Close()
	work := filepath.Join(state, "fleet-work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	n := &fleet.Node{Name: *name, Fleet: f, Host: h, WorkDir: work, Logger: logger,
		Heartbeat: *heartbeat, LostAfter: *lostAfter, Parallel: *parallel, Children: *children}
	logger.Info("node started", "node", *name, "nats", redactURLs(*urls), "state", state)
	if err := n.Run(ctx); err != nil {
		e.errorf("%v", err)
		return exitTaskFailed
	}
	return exitOK
}

// connectFleet connects to NATS and ensures the fleet's streams. A user
// named in the URL gets its own inbox prefix (fleet.InboxPrefix), as
// fleet.SubmitterPermissions and NodePermissions expect; opts come after,
// so a node's own prefix wins.
func connectFleet(ctx context.Context, urls, client string, replicas int, opts ...nats.Option) (*nats.Conn, *fleet.Fleet, error) {
	base := []nats.Option{nats.Name(client)}
	if user := natsUser(urls); user != "" {
		base = append(base, nats.CustomInboxPrefix(fleet.InboxPrefix(user)))
	}
	return fleet.Connect(ctx, urls, replicas, append(base, opts...)...)
}

// natsUser is the user name of the first of urls, "" when it names none
// (or one that is not a subject token).
func natsUser(urls string) string {
	first, _, _ := strings.Cut(urls, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil || u.User == nil {
		return ""
	}
	name := u.User.Username()
	if !nodeName.MatchString(name) {
		return ""
	}
	return name
}

// redactURLs hides the passwords of NATS URLs.
func redactURLs(urls string) string { return fleet.RedactURLs(urls) }

// runFleet is mandate run --nats: the run is submitted to the fleet, one
// node runs it, and its outcome is printed as a local run's would be.
func (e *env) runFleet(ctx context.Context, o runOptions, urls string) int {
	input, err := e.readInput(o.input)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	nc, f, err := connectFleet(ctx, urls, "mandate run", 1)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer nc.Close()
	build := func(ctx context.Context, dir string) ([]byte, error) {
		return host.BuildGuest(ctx, dir, false, o.cache)
	}
	s, modules, err := fleet.Bundle(ctx, o.manifest, o.vars, input, build)
	if err != nil {
		return e.manifestError(err)
	}
	s.Receipt = o.receipt != ""
	if err := f.Submit(ctx, s, modules); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if o.level != hclog.Off {
		fmt.Fprintf(e.stderr, "mandate: submitted %s to the fleet\n", s.ID)
	}
	st, err := f.Wait(ctx, s.ID, fleet.DefaultLease)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			e.errorf("interrupted: the submission %s goes on in the fleet", s.ID)
			return exitInterrupted
		}
		e.errorf("%v", err)
		return exitUsage
	}
	switch st.State {
	case fleet.StateRefused:
		e.errorf("node %s refused the run: %s", st.Node, st.Error)
		return exitUsage
	case fleet.StateLost:
		e.errorf("the run is lost: %s", st.Error)
		if st.After != "" {
			e.errorf("its node said afterwards: %s", st.After)
		}
		return exitTaskFailed
	}
	if o.level != hclog.Off {
		fmt.Fprintf(e.stderr, "mandate: run %s on node %s\n", st.RunID, st.Node)
		for _, l := range st.Lost {
			fmt.Fprintf(e.stderr, "mandate: an earlier attempt was lost with its node: %s\n", kindapi.EscapeText(l))
		}
	}
	if st.Error != "" && o.level != hclog.Off {
		fmt.Fprintf(e.stderr, "mandate: %s\n", kindapi.EscapeText(st.Error))
	}
	if o.receipt != "" {
		if code := e.fleetReceipt(ctx, f, st, o.receipt); code != exitOK && st.Exit == exitOK {
			st.Exit = code
		}
	}
	if o.format == "json" {
		if err := writeJSON(e.stdout, st); err != nil {
			e.errorf("writing the report: %v", err)
		}
		return st.Exit
	}
	if st.HasResult && len(st.Result) > 0 {
		res := st.Result
		if !o.raw && e.isTerm(e.stdout) {
			res = []byte(kindapi.EscapeText(string(res)))
		}
		if _, err := e.stdout.Write(res); err != nil {
			e.errorf("writing the result: %v", err)
		}
		var label kindapi.Label
		if len(st.ResultLabel) > 0 && json.Unmarshal(st.ResultLabel, &label) == nil && !label.IsZero() {
			e.errorf("%s", provenanceLine(label))
		}
	}
	return st.Exit
}

// fleetReceipt checks the receipt a node returned against the key that
// node published with its audit copy (the run state is writable by every
// node; the audit subjects only by their own) and writes it to path.
func (e *env) fleetReceipt(ctx context.Context, f *fleet.Fleet, st fleet.RunState, path string) int {
	if len(st.Receipt) == 0 {
		e.errorf("receipt: node %s returned none", st.Node)
		return exitUsage
	}
	key, err := f.NodeKey(ctx, st.Node)
	if err != nil {
		e.errorf("receipt: %v", err)
		return exitUsage
	}
	if _, err := audit.OpenReceipt(st.Receipt, key); err != nil {
		e.errorf("receipt from node %s does not verify with the key of its audit log: %v", st.Node, err)
		return exitUsage
	}
	if err := host.WriteFileAtomic(path, st.Receipt, 0o644); err != nil {
		e.errorf("receipt: %v", err)
		return exitUsage
	}
	e.errorf("receipt written to %s, signed by node %s; check it with: mandate verify %s --key %s", path, st.Node, path, key)
	return exitOK
}

// listFleetRuns is mandate runs --nats.
func (e *env) listFleetRuns(urls, format string) int {
	ctx, cancel := context.WithTimeout(e.context(), time.Minute)
	defer cancel()
	nc, f, err := connectFleet(ctx, urls, "mandate runs", 1)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer nc.Close()
	states, err := f.AllStates(ctx)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	sort.Slice(states, func(i, j int) bool { return states[i].Submitted.After(states[j].Submitted) })
	if format == "json" {
		if states == nil {
			states = []fleet.RunState{}
		}
		if err := writeJSON(e.stdout, states); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBMISSION\tSTATE\tNODE\tRUN\tEXIT\tATTEMPT\tSUBMITTED\tENDED")
	for _, s := range states {
		ended := ""
		if !s.Ended.IsZero() {
			ended = s.Ended.Format(time.RFC3339)
		}
		exit := ""
		if s.State == fleet.StateDone {
			exit = strconv.Itoa(s.Exit)
		}
		attempt := ""
		if s.Retry > 0 {
			attempt = fmt.Sprintf("%d/%d", s.Attempt, s.Retry+1) // earlier attempts' nodes: --format json's "lost"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, kindapi.EscapeText(s.Node), kindapi.EscapeText(s.RunID),
			exit, attempt, s.Submitted.Format(time.RFC3339), ended)
	}
	tw.Flush()
	return exitOK
}

// verifyFleetAudit is mandate audit verify --nats.
func (e *env) verifyFleetAudit(urls string) int {
	ctx, cancel := context.WithTimeout(e.context(), 10*time.Minute)
	defer cancel()
	nc, f, err := connectFleet(ctx, urls, "mandate audit verify", 1)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer nc.Close()
	logs, err := fleet.VerifyAudit(ctx, f.JS)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if len(logs) == 0 {
		fmt.Fprintln(e.stdout, "no node has copied an audit log to the fleet yet")
		return exitOK
	}
	code := exitOK
	for _, na := range logs {
		if na.Err != nil {
			code = exitTaskFailed
			fmt.Fprintf(e.stdout, "%s: DOES NOT VERIFY: %s (%d entries copied)\n", kindapi.EscapeText(na.Node), kindapi.EscapeText(na.Err.Error()), na.Entries)
			continue
		}
		tail := ""
		if na.Entries > na.Checkpoint {
			tail = fmt.Sprintf("; %d after it, not yet signed", na.Entries-na.Checkpoint)
		}
		fmt.Fprintf(e.stdout, "%s: ok: %d entries of %d runs, the signed checkpoint covers %d%s (key %s)\n",
			kindapi.EscapeText(na.Node), na.Entries, len(na.Runs), na.Checkpoint, tail, kindapi.EscapeText(na.Key))
	}
	return code
}
