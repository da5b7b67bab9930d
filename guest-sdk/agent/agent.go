package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/llm"
)

// Defaults for Config.
const (
	DefaultMaxSteps       = 16
	DefaultMaxArgBytes    = 64 << 10 // the arguments of one tool call
	DefaultMaxResultBytes = 16 << 10 // one tool result, as the model is shown it
	// MaxCallsPerStep bounds the tool calls run for one answer; the rest
	// are answered with a tool error.
	MaxCallsPerStep = 32
	// recordBytes bounds the texts kept in a Step.
	recordBytes = 512
)

// ErrMaxSteps is the error (errors.Is) of a run that used its MaxSteps
// answers without a final one.
var ErrMaxSteps = errors.New("agent: out of steps")

// ErrNoAnswer is the error (errors.Is) of a run whose model's last answer
// asked for no tool but is no answer either: it was cut at max_tokens
// (finish_reason "length", or "content_filter"), or it is empty. The
// Outcome's Final holds what there was of it.
var ErrNoAnswer = errors.New("agent: no final answer")

// Chatter asks a model: one chat-completions round trip. Run uses the
// llm capability's chat operation (CapChatter); tests script one.
type Chatter interface {
	Chat(req abi.ChatRequest) (abi.ChatResponse, error)
}

// ChatFunc is a Chatter as a function.
type ChatFunc func(req abi.ChatRequest) (abi.ChatResponse, error)

// Chat calls f.
func (f ChatFunc) Chat(req abi.ChatRequest) (abi.ChatResponse, error) { return f(req) }

// CapChatter is the chat operation of the llm capability c (llm.Chat).
func CapChatter(c mandate.Cap) Chatter {
	return ChatFunc(func(req abi.ChatRequest) (abi.ChatResponse, error) { return llm.Chat(c, req) })
}

// Config is one run of the loop.
type Config struct {
	Model  string // the model to ask; "" when the capability allows one
	System string // the system prompt; "" for none
	User   string // the task, as the user message
	// Splice are blobs the kernel splices into System and User where
	// abi.SplicePlaceholder(i) stands, so the model reads a document
	// this task never read (the answers then carry its label).
	Splice []mandate.Blob
	// Refs are references the run starts with, for the prompt to name
	// ("book a flight for the traveller whose passport is $passport"):
	// the model sees the names, tools receive the blobs.
	Refs  []Reference
	Tools []ToolDef

	MaxSteps       int      // model answers per run; 0 means DefaultMaxSteps
	MaxTokens      int64    // per answer; 0 means the capability's max_tokens
	Temperature    *float64 // nil: the provider's default
	MaxArgBytes    int      // 0 means DefaultMaxArgBytes
	MaxResultBytes int      // 0 means DefaultMaxResultBytes

	// OnStep is called after each step. nil means PrintSteps(os.Stderr):
	// the kernel forwards a guest's stderr to the operator's log, so
	// `mandate run` shows the steps as they happen. func(Step) {} is
	// silent.
	OnStep func(Step)
}

// Step is one answer of the model and the tool calls it asked for.
type Step struct {
	N            int    // from 1
	Content      string // the model's text (truncated)
	Calls        []Call
	Usage        abi.ChatUsage
	FinishReason string
	Final        bool // the answer had no tool calls: the run's result
}

// Call is one tool call of a Step.
type Call struct {
	ID     string
	Tool   string // the name the model asked for
	Args   string // as the model wrote them (truncated)
	Result string // what the model was shown (truncated): the result or "error: ..."
	Failed bool   // Result is a tool error
	// Errno is the kernel's refusal when the tool failed with one
	// (EDENIED, EFLOW, ELIMIT...), ESUCCESS otherwise.
	Errno abi.Errno
	// Skipped reports a call not run: the run was out of steps.
	Skipped bool
}

// Outcome is what a run did.
type Outcome struct {
	Final        string // the model's final answer (or what there was of it: ErrNoAnswer)
	FinishReason string // of the final answer ("length": cut at max tokens, ErrNoAnswer)
	Steps        []Step
	Usage        abi.ChatUsage // the sum over the steps
	// Transcript is the conversation as the model was last shown it,
	// with its last answer.
	Transcript []abi.ChatMessage
	// Refs are the references tools returned, by "$name".
	Refs map[string]mandate.Blob
}

// Run runs the agent loop on the llm capability model: it sends the
// transcript, runs the tools the answer asks for (in order) and sends
// their results back as tool messages, until an answer asks for no tool
// (the Outcome's Final), MaxSteps answers, or a failed model call.
//
// A tool's failure is the model's to handle: it is shown as the tool
// message "error: ..." (a kernel refusal as "error: EDENIED: reason"),
// and so are an unknown tool and arguments that do not fit the tool's
// schema. A failed model call ends the run with its error (errors.Is
// matches its errno; ELIMIT: the token budget or a size limit), as does
// running out of steps (ErrMaxSteps; the calls of the last answer are
// not run), and so does a last answer that is none (ErrNoAnswer: cut at
// max_tokens, or empty). The Outcome holds the steps taken either way.
//
// Run returns nil only when the model gave its final answer: a guest
// that stops on an error must say so by failing (setting what it has as
// its result, printing the error to stderr and exiting non-zero), so
// that the run is recorded as failed, with the reason, never "done".
func Run(model mandate.Cap, cfg Config) (Outcome, error) {
	return RunWith(CapChatter(model), cfg)
}

// RunWith is Run with any Chatter.
func RunWith(ch Chatter, cfg Config) (Outcome, error) {
	r, err := newRunner(ch, cfg)
	if err != nil {
		return Outcome{}, err
	}
	return r.run()
}

type runner struct {
	ch       Chatter
	cfg      Config
	tools    map[string]ToolDef
	names    []string
	offered  []abi.ChatTool
	splice   []abi.Handle
	refs     *refTable
	ids      map[string]bool // tool call ids in the transcript
	onStep   func(Step)
	out      Outcome
	messages []abi.ChatMessage
}

func newRunner(ch Chatter, cfg Config) (*runner, error) {
	if ch == nil {
		return nil, errors.New("agent: no model")
	}
	if cfg.User == "" && cfg.System == "" {
		return nil, errors.New("agent: no prompt (Config.User)")
	}
	if len(cfg.Splice) > abi.MaxSplice {
		return nil, fmt.Errorf("agent: %d spliced blobs (at most %d)", len(cfg.Splice), abi.MaxSplice)
	}
	if len(cfg.Tools) > abi.MaxChatTools {
		return nil, fmt.Errorf("agent: %d tools (at most %d)", len(cfg.Tools), abi.MaxChatTools)
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.MaxArgBytes <= 0 {
		cfg.MaxArgBytes = DefaultMaxArgBytes
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("agent: MaxTokens %d", cfg.MaxTokens)
	}
	r := &runner{ch: ch, cfg: cfg, tools: map[string]ToolDef{}, refs: newRefTable(), ids: map[string]bool{}, onStep: cfg.OnStep}
	if r.onStep == nil {
		r.onStep = PrintSteps(os.Stderr)
	}
	for _, t := range cfg.Tools {
		switch {
		case t.err != nil:
			return nil, t.err
		case !toolNameRE.MatchString(t.Name):
			return nil, fmt.Errorf("agent: tool name %q: want [A-Za-z0-9_-]{1,64}", t.Name)
		case t.run == nil:
			return nil, fmt.Errorf("agent: tool %s has no function (make tools with agent.Tool)", t.Name)
		}
		if _, dup := r.tools[t.Name]; dup {
			return nil, fmt.Errorf("agent: two tools named %s", t.Name)
		}
		r.tools[t.Name] = t
		r.names = append(r.names, t.Name)
		r.offered = append(r.offered, abi.ChatTool{Type: "function", Function: abi.ToolFunction{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	for _, ref := range cfg.Refs {
		if ref.e == nil || ref.e.blob.IsZero() {
			return nil, errors.New("agent: Config.Refs holds a reference to no blob")
		}
		if _, taken := r.refs.get(ref.e.name); taken {
			return nil, fmt.Errorf("agent: Config.Refs names %s twice", ref.e.name)
		}
		if err := r.refs.add(ref.e); err != nil {
			return nil, err
		}
	}
	for _, b := range cfg.Splice {
		r.splice = append(r.splice, b.Handle())
	}
	if cfg.System != "" {
		r.messages = append(r.messages, abi.ChatMessage{Role: "system", Content: cfg.System})
	}
	if cfg.User != "" {
		r.messages = append(r.messages, abi.ChatMessage{Role: "user", Content: cfg.User})
	}
	return r, nil
}

func (r *runner) finish() Outcome {
	r.out.Transcript = r.messages
	r.out.Refs = make(map[string]mandate.Blob, len(r.refs.names))
	for _, n := range r.refs.names {
		r.out.Refs[n] = r.refs.byName[n]
	}
	return r.out
}

func (r *runner) run() (Outcome, error) {
	for step := 1; ; step++ {
		if n := len(r.messages); n > abi.MaxChatMessages {
			return r.finish(), fmt.Errorf("agent: stopped at step %d: the transcript has %d messages (a model call takes at most %d)", step, n, abi.MaxChatMessages)
		}
		resp, err := r.ch.Chat(abi.ChatRequest{
			Model: r.cfg.Model, Messages: r.messages, Tools: r.offered,
			MaxTokens: r.cfg.MaxTokens, Temperature: r.cfg.Temperature, Splice: r.splice,
		})
		if err != nil {
			return r.finish(), modelError(step, err)
		}
		r.out.Usage.PromptTokens += resp.Usage.PromptTokens
		r.out.Usage.CompletionTokens += resp.Usage.CompletionTokens
		r.out.Usage.TotalTokens += resp.Usage.TotalTokens
		m := resp.Message
		st := Step{N: step, Content: truncate(m.Content, recordBytes), Usage: resp.Usage, FinishReason: resp.FinishReason}

		if len(m.ToolCalls) == 0 {
			st.Final = true
			r.messages = append(r.messages, abi.ChatMessage{Role: "assistant", Content: m.Content})
			r.out.Final, r.out.FinishReason = m.Content, resp.FinishReason
			r.step(st)
			switch {
			case resp.FinishReason == "length" || resp.FinishReason == "content_filter":
				return r.finish(), fmt.Errorf("%w: stopped at step %d: the model's answer was cut (finish_reason %q)", ErrNoAnswer, step, resp.FinishReason)
			case strings.TrimSpace(m.Content) == "":
				return r.finish(), fmt.Errorf("%w: stopped at step %d: the model answered nothing", ErrNoAnswer, step)
			}
			return r.finish(), nil
		}

		calls := r.echo(step, m.ToolCalls)
		r.messages = append(r.messages, abi.ChatMessage{Role: "assistant", Content: neutralize(m.Content), ToolCalls: calls})
		if step >= r.cfg.MaxSteps {
			var names []string
			for i, tc := range m.ToolCalls {
				st.Calls = append(st.Calls, Call{ID: calls[i].ID, Tool: tc.Function.Name, Args: truncate(tc.Function.Arguments, recordBytes), Skipped: true})
				names = append(names, strconv.Quote(truncate(tc.Function.Name, 64)))
			}
			r.step(st)
			return r.finish(), fmt.Errorf("%w: the model still asked for %s after %d steps (Config.MaxSteps); not run",
				ErrMaxSteps, strings.Join(names, ", "), r.cfg.MaxSteps)
		}
		for i, tc := range m.ToolCalls {
			content, c := r.call(step, i, tc, calls[i].ID)
			st.Calls = append(st.Calls, c)
			r.messages = append(r.messages, abi.ChatMessage{Role: "tool", ToolCallID: calls[i].ID, Content: content})
		}
		r.step(st)
	}
}

func (r *runner) step(st Step) {
	r.out.Steps = append(r.out.Steps, st)
	r.onStep(st)
}

// modelError explains a failed model call.
func modelError(step int, err error) error {
	switch mandate.ErrnoOf(err) {
	case abi.ELIMIT:
		return fmt.Errorf("agent: stopped at step %d: the model's token budget, or a bound on a request or answer, is reached: %w", step, err)
	case abi.EFLOW:
		if step > 1 {
			return fmt.Errorf("agent: stopped at step %d: this task may no longer show the model what it holds "+
				"(a tool read data the model is not cleared for: hand such data on by reference, see Ref): %w", step, err)
		}
	}
	return fmt.Errorf("agent: step %d: the model call failed: %w", step, err)
}

// echo is the answer's tool calls as the transcript repeats them to the
// model: what a provider and the llm capability accept whatever the model
// wrote (type function; a name of [A-Za-z0-9_-]{1,64}; a unique id;
// arguments that are a JSON object, else {}). The tool messages answer
// these ids.
func (r *runner) echo(step int, tcs []abi.ToolCall) []abi.ToolCall {
	out := make([]abi.ToolCall, len(tcs))
	for i, tc := range tcs {
		id := tc.ID
		if id == "" || len(id) > 128 || r.ids[id] || !printableASCII(id) {
			id = "call_" + strconv.Itoa(step) + "_" + strconv.Itoa(i)
			for n := 2; r.ids[id]; n++ {
				id = "call_" + strconv.Itoa(step) + "_" + strconv.Itoa(i) + "_" + strconv.Itoa(n)
			}
		}
		r.ids[id] = true
		name := tc.Function.Name
		if !toolNameRE.MatchString(name) {
			name = "invalid_tool_name"
		}
		args := tc.Function.Arguments
		if !jsonObject(args, r.cfg.MaxArgBytes) {
			args = "{}"
		}
		out[i] = abi.ToolCall{ID: id, Type: "function", Function: abi.FunctionCall{Name: name, Arguments: args}}
	}
	return out
}

func jsonObject(s string, max int) bool {
	t := strings.TrimSpace(s)
	return len(s) <= max && strings.HasPrefix(t, "{") && abi.CheckJSON([]byte(t)) == nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// call runs one tool call and returns the tool message's content.
func (r *runner) call(step, i int, tc abi.ToolCall, id string) (string, Call) {
	c := Call{ID: id, Tool: tc.Function.Name, Args: truncate(tc.Function.Arguments, recordBytes)}
	var content string
	t, ok := r.tools[tc.Function.Name]
	switch {
	case i >= MaxCallsPerStep:
		content = fmt.Sprintf("error: not run: at most %d tool calls are run per answer", MaxCallsPerStep)
		c.Failed = true
	case !ok:
		content = fmt.Sprintf("error: no tool named %q (tools: %s)", truncate(tc.Function.Name, 64), r.toolList())
		c.Failed = true
	default:
		ctx := &Ctx{Step: step, Tool: t.Name, CallID: id, refs: r.refs}
		res, toolErr, argErr := t.run(ctx, tc.Function.Arguments, r.cfg.MaxArgBytes)
		switch {
		case argErr != nil:
			content = "error: invalid arguments for " + t.Name + ": " + argErr.Error()
			c.Failed = true
		case toolErr != nil:
			content = toolError(toolErr)
			c.Failed = true
			var me *mandate.Error
			if errors.As(toolErr, &me) {
				c.Errno = me.Errno
			}
		default:
			content = res
		}
	}
	content = neutralize(truncateResult(content, r.cfg.MaxResultBytes))
	c.Result = truncate(content, recordBytes)
	return content, c
}

func (r *runner) toolList() string {
	if len(r.names) == 0 {
		return "none"
	}
	return strings.Join(r.names, ", ")
}

// neutralize breaks every splice placeholder in text the loop did not
// write (tool results, the model's own words repeated to it): the kernel
// splices Config.Splice into every message's content, so a placeholder a
// fetched page carries would otherwise be filled in (or, naming no blob,
// fail the call).
func neutralize(s string) string {
	return strings.ReplaceAll(s, "{{mandate:splice:", "{ {mandate:splice:")
}

// truncateResult cuts a tool result the model is shown to max bytes, and
// says so.
func truncateResult(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := cutUTF8(s, max)
	return cut + "\n[truncated: " + strconv.Itoa(len(cut)) + " of " + strconv.Itoa(len(s)) + " bytes shown]"
}

// truncate cuts s to at most n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n-len("…")) + "…"
}

func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// PrintSteps writes each step to w as it ends, a line per step and per
// tool call, each text cut to a line of at most 160 bytes with control
// characters escaped:
//
//	agent: step 1 (812+40 tokens): 2 tool calls
//	agent:   search {"from":"SFO"} -> {"flights":[...]}
//	agent:   book {"passport":"$passport"} -> error: EDENIED: net: fetch: ...
//	agent: step 2 (1040+25 tokens): answer: Booked TP1 for Alice.
func PrintSteps(w io.Writer) func(Step) {
	return func(st Step) {
		var b strings.Builder
		fmt.Fprintf(&b, "agent: step %d (%d+%d tokens): ", st.N, st.Usage.PromptTokens, st.Usage.CompletionTokens)
		switch {
		case st.Final:
			b.WriteString("answer: " + oneLine(st.Content, 160))
			if st.FinishReason == "length" {
				b.WriteString(" [cut at max tokens]")
			}
		default:
			n := strconv.Itoa(len(st.Calls)) + " tool call"
			if len(st.Calls) != 1 {
				n += "s"
			}
			b.WriteString(n)
			if st.Content != "" {
				b.WriteString(": " + oneLine(st.Content, 160))
			}
		}
		b.WriteByte('\n')
		for _, c := range st.Calls {
			res := oneLine(c.Result, 160)
			if c.Skipped {
				res = "not run: out of steps"
			}
			fmt.Fprintf(&b, "agent:   %s %s -> %s\n", oneLine(c.Tool, 64), oneLine(c.Args, 160), res)
		}
		io.WriteString(w, b.String())
	}
}

// oneLine makes s one printable line of at most n bytes: control and
// other unprintable characters (terminal escapes, line separators) are
// escaped, so what a model or a page wrote cannot forge log lines.
func oneLine(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		if b.Len() > n {
			break
		}
	}
	return truncate(b.String(), n)
}
