package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
)

var runHelp = `Usage: mandate run MANIFEST.hcl [--input FILE|-] [--var NAME=VALUE ...]
                   [--log-level LEVEL] [--engine NAME] [--cache-dir DIR] [--state-dir DIR]
                   [--receipt FILE [--receipt-format note|dsse]] [--approve MODE] [--raw]
                   [--format text|json] [--nats URLS]

Runs the root task a manifest describes: loads the manifest, builds its
module if it names a Go guest directory (cached by content), compiles it,
checks the manifest's digest pin, grants the task its capabilities, runs it
within its limits, prints the task's result to stdout, and records the run
(see "mandate graph"). The guest's own stdout and stderr, and the kernel's
decisions, are logged to stderr. Once the run is recorded, its id is
printed on stderr ("mandate: run ID"; not with --log-level off); each
task's result and what was kept of its stdout and stderr are stored with
the run: "mandate logs ID" shows them.

Flags:

	--input FILE       the task's input (what the guest reads with
	                   mandate.Input); "-" reads standard input; at most 64 MiB
	--var NAME=VALUE   sets var.NAME in the manifest; repeatable
	--log-level LEVEL  trace, debug, info (default), warn, error or off
	--engine NAME      the WebAssembly engine: wazero (default), or wasmtime in
	                   a build with the tag wasmtime; default $MANDATE_ENGINE
	--cache-dir DIR    cache root for built guests (DIR/guests) and compiled
	                   modules (DIR/<engine>); default $MANDATE_CACHE_DIR,
	                   else the user cache directory + /mandate
	--state-dir DIR    where the run is recorded; default $MANDATE_STATE_DIR,
	                   else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate
	--nats URLS        submit the run to a fleet of "mandate node"s on NATS
	                   JetStream instead of running it here: one node runs
	                   it and records it; its result is printed here
	--receipt FILE     write a signed receipt of what the run could do (module,
	                   manifest, principal, every capability granted, final
	                   labels, the audit checkpoint); check it with
	                   "mandate verify FILE"; with --nats the node signs it
	                   and it is checked here against the key that node's
	                   audit copy carries (mandate verify FILE --key KEY)
	--receipt-format F note (default): a signed note; dsse: an in-toto
	                   bundle (JSON Lines of DSSE envelopes signed with the
	                   same key): the run as a statement of predicate type
	                   https://github.com/mandatevm/mandate/attestation/run/v1
	                   and, for a module mandate build wrote, its SLSA
	                   provenance; mandate verify reads both, and so does
	                   any DSSE verifier given "mandate audit key --pem"
	--raw              write the task's result as it is even to a terminal
	                   (by default, control characters and escape sequences
	                   a guest put in it are escaped on a terminal; a pipe
	                   or file always gets the bytes as they are)
	--format FORMAT    text (default): the result as it is on stdout; json:
	                   one JSON object on stdout instead, once the run is
	                   recorded: {"run", "state", "exit", "error",
	                   "result" (when it is UTF-8 text) or "result_base64",
	                   "denials": [{"task", "cap", "kind", "op", "errno",
	                   "reason", ...}], "state_dir"}; a run refused before
	                   it was recorded (usage, manifest, build errors)
	                   prints nothing on stdout
	--approve MODE     uses that need a person's yes (a payment above its
	                   approve_above, a call matching approve_when): prompt
	                   (default) asks on the terminal and denies when there
	                   is none (CI, pipes); wait records the question in the
	                   state directory and waits (10 minutes, then refuses)
	                   for the person to answer it with "mandate approvals
	                   yes|no ID" or on mandate ui's approvals page (stderr
	                   says where); yes approves all; no denies all

Exit codes:

	0    the task finished normally
	1    the task failed: it exited non-zero or trapped, or a kernel error
	     ended it; the message names its last denied call, if any
	2    usage, manifest or build error (reported as FILE:LINE,COL: message;
	     nothing ran), a digest pin mismatch, or the run could not be
	     recorded (after the result was printed)
	3    the task ran out of a limit: it was stopped at its deadline, or it
	     died after its memory limit refused to grow
	130  mandate was interrupted (Ctrl-C or SIGTERM) and killed the task

A manifest (the grammar of "go doc github.com/mandatevm/mandate/manifest"):

` + tabIndent(manifest.Grammar) + `
Examples:

	mandate run quickstart.hcl --var origin=https://flights.example
	echo '{"from":"SFO"}' | mandate run planner.hcl --input -
	mandate run quickstart.hcl --log-level debug 2>run.log > result.json
`

// varFlag collects --var NAME=VALUE.
type varFlag map[string]string

func (v varFlag) String() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (v varFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	if !validVarName(name) {
		return fmt.Errorf("%q is not a variable name (letters, digits, _ and -, starting with a letter or _)", name)
	}
	v[name] = value
	return nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
		case i > 0 && (r == '-' || '0' <= r && r <= '9'):
		default:
			return false
		}
	}
	return true
}

// runOptions are the parsed flags of mandate run.
type runOptions struct {
	approve  string
	receipt  string
	receiptF string // the receipt's format
	manifest string
	input    string
	vars     varFlag
	level    hclog.Level
	engine   string
	cache    string
	state    string
	raw      bool   // the result as it is, even to a terminal
	format   string // text or json
}

func runRun(e *env, args []string) int {
	c := lookupCommand("run")
	fs := flagSet("run")
	o := runOptions{vars: varFlag{}}
	fs.StringVar(&o.input, "input", "", "")
	fs.Var(o.vars, "var", "")
	level := fs.String("log-level", "info", "")
	fs.StringVar(&o.engine, "engine", "", "")
	cacheFlag := fs.String("cache-dir", "", "")
	stateFlag := stateDirFlag(fs)
	fs.StringVar(&o.approve, "approve", approvePrompt, "")
	fs.StringVar(&o.receipt, "receipt", "", "")
	fs.StringVar(&o.receiptF, "receipt-format", host.ReceiptNote, "")
	fs.BoolVar(&o.raw, "raw", false, "")
	fs.StringVar(&o.format, "format", "text", "")
	natsURLs := fs.String("nats", "", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if o.manifest, code, ok = e.oneArg(c, pos, "the manifest"); !ok {
		return code
	}
	if o.format != "text" && o.format != "json" {
		return e.usageError(c, "unknown format %q (formats: text, json)", o.format)
	}
	if o.receiptF != host.ReceiptNote && o.receiptF != host.ReceiptDSSE {
		return e.usageError(c, "unknown receipt format %q (formats: %s, %s)", o.receiptF, host.ReceiptNote, host.ReceiptDSSE)
	}
	o.level = hclog.LevelFromString(*level)
	if o.level == hclog.NoLevel {
		return e.usageError(c, "unknown log level %q (levels: trace, debug, info, warn, error, off)", *level)
	}
	if o.engine, o.cache, o.state, code, ok = e.runDirs(c, o.engine, *cacheFlag, *stateFlag); !ok {
		return code
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *natsURLs != "" {
		if o.receiptF != host.ReceiptNote {
			return e.usageError(c, "--receipt-format %s is not available with --nats: the node that runs it signs a note", o.receiptF)
		}
		return e.runFleet(ctx, o, *natsURLs)
	}
	defer e.capCache(o.cache)
	return e.runTask(ctx, stop, o)
}

// runDirs resolves what a command that runs guests needs besides its
// arguments: the engine (the flag, else $MANDATE_ENGINE, else the
// default; one this build has), the cache root and the state directory.
func (e *env) runDirs(c *command, engine, cacheFlag, stateFlag string) (eng, cache, state string, code int, ok bool) {
	if engine == "" {
		engine = e.getenv("MANDATE_ENGINE")
	}
	if engine == "" {
		engine = host.DefaultEngine
	}
	if !host.HasEngine(engine) {
		return "", "", "", e.usageError(c, "%s", host.UnknownEngine(engine)), false
	}
	var err error
	if cache, err = e.cacheDir(cacheFlag); err != nil {
		e.errorf("%v", err)
		return "", "", "", exitUsage, false
	}
	if state, err = e.stateDir(stateFlag); err != nil {
		e.errorf("%v", err)
		return "", "", "", exitUsage, false
	}
	return engine, cache, state, exitOK, true
}

// runTask runs the manifest's task and records the run. stop restores the
// default signal behaviour: after a first interrupt, a second one kills
// mandate at once.
func (e *env) runTask(ctx context.Context, stop func(), o runOptions) int {
	m, err := manifest.Load(o.manifest, o.vars)
	if err != nil {
		return e.manifestError(err)
	}
	input, err := e.readInput(o.input)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   "mandate",
		Level:  o.level,
		Output: e.stderr,
	})
	approver, waiter, closeApprover, err := newRunApprover(o.approve, e.stderr, o.state, "mandate run "+filepath.Base(o.manifest))
	if err != nil {
		if o.approve == approveWait {
			e.errorf("--approve wait: %v", err)
			return exitUsage
		}
		return e.usageError(lookupCommand("run"), "%v", err)
	}
	defer closeApprover()
	// The run goes through the host API, as a Go program's would.
	h, err := host.Open(ctx, host.Options{StateDir: o.state, CacheDir: o.cache, Engine: o.engine,
		Logger: logger, Approver: approver})
	if err != nil {
		var oe *host.OpenError
		switch {
		case errors.As(err, &oe) && oe.Head:
			e.errorf("%v\nno run starts on a log that cannot be trusted; inspect it with: mandate audit verify --state-dir %s", err, o.state)
		case errors.As(err, &oe) && oe.Log:
			e.errorf("%v\nno run starts without its log; inspect it with: mandate audit verify --state-dir %s", err, o.state)
		default:
			e.errorf("%v", err)
		}
		return exitUsage
	}
	defer h.Close()
	r, err := h.Start(ctx, host.RunSpec{Manifest: m, Input: input, Receipt: o.receipt, ReceiptFormat: o.receiptF, Begun: func(id string) {
		if waiter != nil {
			waiter.Run = id // before the task starts: no approval is asked yet
		}
		if o.level != hclog.Off {
			fmt.Fprintf(e.stderr, "mandate: run %s\n", id)
		}
	}})
	if err != nil {
		var re *host.RefusedError
		if errors.As(err, &re) {
			if re.Record.Run.Exit == host.ExitInterrupted {
				stop()
				e.errorf("interrupted: the run ended before its task started (%v)", re.Err)
				e.report(o, re.Record, nil, kindapi.Label{})
				return exitInterrupted
			}
			code := e.manifestError(re.Err)
			if re.Record.Run.Exit == host.ExitLimit {
				code = exitLimit // its module's compile ran out of the task's time or memory
			}
			e.report(o, re.Record, nil, kindapi.Label{})
			return code
		}
		return e.manifestError(err)
	}
	t := r.Task()
	interrupted := false
	select {
	case <-t.Done():
		// The task may have ended because the signal canceled its
		// context: that is an interruption too, whichever case won.
		if ctx.Err() != nil {
			interrupted = true
			stop()
		}
	case <-ctx.Done():
		interrupted = true
		stop()
		logger.Warn("interrupted; killing the task", "task", t.ID())
		t.Kill()
	}
	<-t.Done()

	// The result first: whatever happens to the record, it is not lost.
	// A guest chose its bytes: on a terminal they are escaped unless --raw.
	// (In JSON, it is part of the report, printed once the run is.)
	// Written from the task's blob, not a copy of it: a large result is
	// not held twice more here.
	rb := t.ResultBlob()
	if o.format == "text" && rb != nil && rb.Len() > 0 {
		var err error
		if !o.raw && e.isTerm(e.stdout) {
			res, _ := t.Result()
			_, err = io.WriteString(e.stdout, kindapi.EscapeText(string(res)))
		} else {
			_, err = rb.Reader().WriteTo(e.stdout)
		}
		if err != nil {
			e.errorf("writing the result: %v", err)
		}
	}
	out, _ := r.Wait(context.Background())
	// The answer is a sink too: say what influenced it.
	if o.format == "text" && rb != nil && rb.Len() > 0 && !out.ResultLabel.IsZero() {
		e.errorf("%s", provenanceLine(out.ResultLabel))
	}
	// Beside the answer, what was done: the answer is what the task (a
	// model) says; the effects are what the audit log recorded.
	if o.format == "text" {
		io.WriteString(e.stderr, effectsText(out.Record.Effects, out.Record.EffectsDropped))
	}
	if out.Err != nil {
		if interrupted {
			e.errorf("interrupted: %v", out.Err)
		} else {
			e.errorf("%v", out.Err)
		}
	}
	if out.CheckpointErr != nil {
		e.errorf("audit checkpoint: %v", out.CheckpointErr)
	}
	if out.ReceiptErr != nil {
		e.errorf("receipt: %v", out.ReceiptErr)
	}
	if out.RecordErr != nil {
		e.errorf("%v", out.RecordErr)
	}
	var result []byte
	if out.HasResult {
		result = out.Result
	}
	e.report(o, out.Record, result, out.ResultLabel)
	return out.Exit
}

// effectsText lists a run's effects, as the audit log recorded them, one
// a line under a heading ("" for none). Everything is escaped: a guest
// chose the URL and body, a server the outcome.
func effectsText(effects []runstore.Effect, dropped int) string {
	if len(effects) == 0 && dropped == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("effects (from the audit log):\n")
	for _, ef := range effects {
		b.WriteString(effectLine(ef))
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "  ... and %d more (mandate audit --run RUN)\n", dropped)
	}
	return b.String()
}

// effectLine is one effect, indented, as mandate run and mandate graph
// print it: "  t1 net: POST https://book.example/book {...} → 200".
func effectLine(ef runstore.Effect) string {
	return fmt.Sprintf("  %s %s: %s → %s\n", kindapi.Printable(ef.Task), kindapi.Printable(ef.Kind),
		kindapi.Printable(ef.Summary), kindapi.Printable(ef.Outcome))
}

// provenanceLine says what a result's label means: which sources
// influenced it, and whose data it holds. Tags are escaped: a guest may
// have chosen them.
func provenanceLine(l kindapi.Label) string {
	var parts []string
	if integ := l.Integ(); len(integ) > 0 {
		parts = append(parts, "this answer was influenced by "+kindapi.EscapeText(strings.Join(integ, ", ")))
	}
	if conf := l.Conf(); len(conf) > 0 {
		parts = append(parts, "it holds data labelled "+kindapi.EscapeText(strings.Join(conf, ", ")))
	}
	return strings.Join(parts, "; ")
}

// runReport is what "mandate run --format json" prints.
type runReport struct {
	Run          string            `json:"run"`
	State        string            `json:"state"`
	Exit         int               `json:"exit"`
	Error        string            `json:"error,omitempty"`
	Result       *string           `json:"result,omitempty"`
	ResultBase64 *string           `json:"result_base64,omitempty"` // base64: what encoding/json makes of a []byte
	ResultLabel  *kindapi.Label    `json:"result_label,omitempty"`
	Denials      []runstore.Denial `json:"denials"`
	DenialsMore  int               `json:"denials_dropped,omitempty"`
	// Effects are what the run's calls did outside the kernel, from the
	// audit log: what was done, whatever the result says.
	Effects     []runstore.Effect `json:"effects"`
	EffectsMore int               `json:"effects_dropped,omitempty"`
	StateDir    string            `json:"state_dir"`
}

// report prints the JSON report of a recorded run, with --format json.
func (e *env) report(o runOptions, rec Record, result []byte, label kindapi.Label) {
	if o.format != "json" {
		return
	}
	r := runReport{Run: rec.Run.ID, State: rec.Run.State, Exit: rec.Run.Exit, Error: rec.Run.Error,
		Denials: rec.Denials, DenialsMore: rec.DenialsDropped, Effects: rec.Effects, EffectsMore: rec.EffectsDropped, StateDir: o.state}
	if r.Denials == nil {
		r.Denials = []runstore.Denial{}
	}
	if r.Effects == nil {
		r.Effects = []runstore.Effect{}
	}
	// The result is streamed into the report where a placeholder was
	// marshalled, in pieces: a large result is not copied three more
	// times (a string, its JSON, the JSON indented). The bytes are those
	// writeJSON would write.
	var token [12]byte
	rand.Read(token[:])
	placeholder := "mandate-result-" + hex.EncodeToString(token[:])
	text := utf8.Valid(result)
	switch {
	case result == nil:
	case text:
		r.Result = &placeholder
	default:
		r.ResultBase64 = &placeholder
	}
	if result != nil {
		r.ResultLabel = &label
	}
	if err := writeJSONWith(e.stdout, r, placeholder, result, text); err != nil {
		e.errorf("writing the report: %v", err)
	}
}

// writeJSONWith is writeJSON of v, the JSON string placeholder in it
// replaced by the JSON string of data (as text, else base64), written in
// pieces.
func writeJSONWith(w io.Writer, v any, placeholder string, data []byte, text bool) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	i := bytes.Index(b, []byte(`"`+placeholder+`"`))
	if data == nil || i < 0 {
		_, err = w.Write(append(escapeControls(b), '\n'))
		return err
	}
	bw := bufio.NewWriter(w)
	bw.Write(escapeControls(b[:i]))
	bw.WriteByte('"')
	const piece = 48 << 10 // a multiple of 3: base64 in pieces is the whole's
	for len(data) > 0 {
		n := min(piece, len(data))
		if !text {
			bw.WriteString(base64.StdEncoding.EncodeToString(data[:n]))
			data = data[n:]
			continue
		}
		for n < len(data) && !utf8.RuneStart(data[n]) {
			n++
		}
		q, err := json.Marshal(string(data[:n]))
		if err != nil {
			return err
		}
		bw.Write(escapeControls(q[1 : len(q)-1]))
		data = data[n:]
	}
	bw.WriteByte('"')
	bw.Write(escapeControls(b[i+len(placeholder)+2:]))
	bw.WriteByte('\n')
	return bw.Flush()
}

// manifestError prints a manifest error (one FILE:LINE,COL: message per
// line) and returns the usage exit code.
func (e *env) manifestError(err error) int {
	var me *manifest.Error
	if errors.As(err, &me) {
		fmt.Fprintln(e.stderr, err)
	} else {
		e.errorf("%v", err)
	}
	return exitUsage
}

// readInput reads the task's input: nil without --input, standard input
// for "-".
func (e *env) readInput(name string) ([]byte, error) {
	var r io.Reader
	switch name {
	case "":
		return nil, nil
	case "-":
		r = e.stdin
	default:
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, abi.MaxBlobLen+1))
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if len(b) > abi.MaxBlobLen {
		return nil, fmt.Errorf("input: larger than %d bytes", abi.MaxBlobLen)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}
