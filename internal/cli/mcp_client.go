package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"

	"github.com/mandatevm/mandate/internal/mcpserve"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// "mandate mcp client URL": one MCP session over Streamable HTTP, kept
// over several calls, for a person at a shell to see what a session's
// label does (the one-shot clients of others start a session per call).

const mcpClientHelp = `Usage: mandate mcp client URL [--token-file FILE | --token TOKEN]
                          [--format text|json] [-- COMMAND ...]

Opens one session with the MCP server at URL (Streamable HTTP, as
"mandate mcp serve --http" prints it) and runs commands in it, one a
line from stdin, or each argument after "--": so every call is in the
same session, and what one call shows the session decides what the next
may do. The session ends (the server records its run as done) when the
commands do.

The token: the first of --token-file FILE (a file of "mandate mcp serve
--token-file": lines CLIENT TOKEN [PRINCIPAL], or one bare token), else
--token TOKEN, else $MANDATE_MCP_TOKEN; sent as "Authorization: Bearer
TOKEN". None: no Authorization header.

Commands:

	tools                 the tools, with why one is unavailable now
	call NAME [JSON]      call a tool with the JSON object as its
	                      arguments (default {}); a refusal is shown as
	                      "error: ERRNO: the kernel's reason", and the
	                      next command runs all the same
	session               the session's id and label (what it has been
	                      shown), and the tools that label refuses
	resources             the server's resources
	read URI              read a resource
	help                  these commands

Blank lines and lines starting with # are skipped.

Flags:

	--token-file FILE     the token: the first of a token file
	--token TOKEN         the token (visible to other users in ps: prefer
	                      the file or $MANDATE_MCP_TOKEN)
	--format text|json    text (default), or one JSON object a command:
	                      {"command": LINE, "result": the server's result}
	                      or {"command": LINE, "error": MESSAGE}

Exit codes: 0 when every command ran (a tool's error, a refusal, is a
result); 1 when a command was bad or the server answered one with an
error; 2 on a usage error or when the session could not start (the
server's refusal, a wrong token, nothing listening).

Example:

	mandate mcp client http://127.0.0.1:8765/ --token-file tokens -- \
	    tools 'call my_benefits' 'call web_search {"q":"dentist"}' session
`

// runMCPClient is "mandate mcp client URL".
func runMCPClient(e *env, c *command, args []string) int {
	cc := *c
	cc.help = mcpClientHelp // for --help and usage errors
	c = &cc
	fs := flagSet("mcp client")
	tokenFile := fs.String("token-file", "", "")
	token := fs.String("token", "", "")
	format := fs.String("format", "text", "")
	// The commands after "--" are positional, and so is the URL: parse
	// the flags before "--" alone, so that a command is never a flag.
	flagArgs, cmds := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			flagArgs, cmds = args[:i], args[i+1:]
			if cmds == nil {
				cmds = []string{}
			}
			break
		}
	}
	pos, code, ok := e.parse(c, fs, flagArgs)
	if !ok {
		return code
	}
	endpoint, code, ok := e.oneArg(c, pos, "the server's URL: mandate mcp client http://127.0.0.1:PORT/")
	if !ok {
		return code
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return e.usageError(c, "%q is not an http:// or https:// URL (the address \"mandate mcp serve --http\" prints)", endpoint)
	}
	if *format != "text" && *format != "json" {
		return e.usageError(c, "--format %q: text or json", *format)
	}
	tok, err := clientTokenOf(*tokenFile, *token, e.getenv)
	if err != nil {
		return e.usageError(c, "%v", err)
	}
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rt := &clientRoundTripper{token: tok}
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mandate-mcp-client", Version: versionString()}, nil).Connect(ctx, transport, nil)
	if err != nil {
		e.errorf("mcp client: no session with %s: %s", endpoint, rt.explain(err))
		return exitUsage
	}
	defer cs.Close() // ends the session: the server records its run as done

	cl := &mcpClient{e: e, cs: cs, json: *format == "json"}
	if !cl.json {
		ir := cs.InitializeResult()
		server := "the server"
		if ir != nil && ir.ServerInfo != nil {
			// mandate's version is a block, its first line "mandate VERSION".
			v, _, _ := strings.Cut(ir.ServerInfo.Version, "\n")
			if !strings.HasPrefix(v, ir.ServerInfo.Name+" ") {
				v = ir.ServerInfo.Name + " " + v
			}
			server = kindapi.Printable(strings.TrimSpace(v))
		}
		fmt.Fprintf(e.stdout, "session %s with %s at %s\n", cs.ID(), server, endpoint)
	}
	var lines func() (string, bool)
	echo := true
	if cmds != nil {
		lines = func() (string, bool) {
			if len(cmds) == 0 {
				return "", false
			}
			l := cmds[0]
			cmds = cmds[1:]
			return l, true
		}
	} else {
		sc := bufio.NewScanner(e.stdin)
		sc.Buffer(make([]byte, 64<<10), maxMCPRequest)
		interactive := false
		if f, ok := e.stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				interactive = true
			}
		}
		echo = !interactive
		lines = func() (string, bool) {
			if interactive && !cl.json {
				fmt.Fprint(e.stdout, "> ")
			}
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					e.errorf("mcp client: reading the commands: %v", err)
					cl.failed = true
				}
				return "", false
			}
			return sc.Text(), true
		}
	}
	for {
		line, ok := lines()
		if !ok {
			break
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if echo && !cl.json {
			fmt.Fprintf(e.stdout, "> %s\n", kindapi.EscapeText(line))
		}
		if !cl.run(ctx, line) {
			break // the connection is gone, or the client was interrupted
		}
	}
	if cl.failed {
		return exitTaskFailed
	}
	return exitOK
}

// clientTokenOf is the token a client sends: the first of tokenFile's,
// else token, else $MANDATE_MCP_TOKEN; "" for none.
func clientTokenOf(tokenFile, token string, getenv func(string) string) (string, error) {
	if tokenFile != "" && token != "" {
		return "", errors.New("--token-file and --token both name a token: give one")
	}
	if token != "" {
		return token, nil
	}
	if tokenFile == "" {
		return getenv("MANDATE_MCP_TOKEN"), nil
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %v", err)
	}
	if _, err := parseTokenFile(b); err != nil {
		return "", fmt.Errorf("--token-file %s: %v", tokenFile, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case len(f) == 1:
			return f[0], nil // the one bare token
		default:
			return f[1], nil // CLIENT TOKEN [PRINCIPAL]
		}
	}
	return "", fmt.Errorf("--token-file %s: holds no token", tokenFile)
}

// clientRoundTripper sends the token with every request, and keeps the
// server's last refusal (an HTTP error status and its text) to say why
// a session could not start.
type clientRoundTripper struct {
	token string
	mu    sync.Mutex
	last  string // protected by mu
}

func (c *clientRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	// The refusal's text, at most a line's worth, put back for the SDK.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	c.last = fmt.Sprintf("%s %s: %s", r.Method, resp.Status, strings.TrimSpace(string(body)))
	c.mu.Unlock()
	return resp, nil
}

// explain is err, with the server's refusal when there was one.
func (c *clientRoundTripper) explain(err error) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == "" {
		return err.Error()
	}
	return "the server answered " + kindapi.Printable(c.last)
}

// mcpClient runs a client's commands in its session.
type mcpClient struct {
	e      *env
	cs     *mcp.ClientSession
	json   bool
	failed bool // a command was bad, or the server answered it with an error
}

// run runs one command line; false when no further command can run.
func (c *mcpClient) run(ctx context.Context, line string) bool {
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	var res any
	var err error
	switch verb {
	case "help":
		if c.json {
			res = map[string]any{"commands": []string{"tools", "call NAME [JSON]", "session", "resources", "read URI", "help"}}
			break
		}
		fmt.Fprint(c.e.stdout, "tools | call NAME [JSON] | session | resources | read URI | help\n")
		return true
	case "tools":
		res, err = c.cs.ListTools(ctx, nil)
	case "call":
		name, argText, _ := strings.Cut(rest, " ")
		if name == "" {
			return c.bad(line, "call NAME [JSON]: which tool?")
		}
		args := map[string]any{}
		if argText = strings.TrimSpace(argText); argText != "" {
			dec := json.NewDecoder(strings.NewReader(argText))
			dec.UseNumber()
			if jerr := dec.Decode(&args); jerr != nil || dec.More() {
				return c.bad(line, "call %s: the arguments are not one JSON object: %s", name, argText)
			}
		}
		res, err = c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	case "session":
		var lr *mcp.ListToolsResult
		if lr, err = c.cs.ListTools(ctx, nil); err == nil {
			res = sessionView(c.cs.ID(), lr)
		}
	case "resources":
		res, err = c.cs.ListResources(ctx, nil)
	case "read":
		if rest == "" {
			return c.bad(line, "read URI: which resource?")
		}
		res, err = c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: rest})
	default:
		return c.bad(line, "unknown command %q: tools, call NAME [JSON], session, resources, read URI, help", verb)
	}
	if err != nil {
		c.failed = true
		c.show(line, nil, err)
		return !errors.Is(err, mcp.ErrConnectionClosed) && ctx.Err() == nil
	}
	c.show(line, res, nil)
	return true
}

// bad reports a bad command line; the next one runs.
func (c *mcpClient) bad(line, format string, args ...any) bool {
	c.failed = true
	c.show(line, nil, fmt.Errorf(format, args...))
	return true
}

// show prints a command's result or error.
func (c *mcpClient) show(line string, res any, err error) {
	out := c.e.stdout
	if c.json {
		v := map[string]any{"command": line}
		if err != nil {
			v["error"] = err.Error()
		} else {
			v["result"] = res
		}
		b, merr := json.Marshal(v)
		if merr != nil {
			b, _ = json.Marshal(map[string]any{"command": line, "error": merr.Error()})
		}
		fmt.Fprintf(out, "%s\n", b)
		return
	}
	if err != nil {
		c.e.errorf("mcp client: %s: %v", line, err)
		return
	}
	// What a server sends is shown escaped: it is not the terminal's.
	esc := kindapi.EscapeText
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, t := range r.Tools {
			fmt.Fprintf(tw, "%s\t%s\n", esc(t.Name), esc(t.Description))
		}
		tw.Flush()
	case *mcp.CallToolResult:
		text := contentText(r.Content)
		if r.IsError {
			fmt.Fprintf(out, "error: %s\n", esc(text))
		} else {
			fmt.Fprintf(out, "%s\n", esc(text))
		}
		if l, ok := metaLabel(r.Meta); ok {
			fmt.Fprintf(out, "  (result labelled %s)\n", esc(l))
		}
	case *sessionInfo:
		fmt.Fprintf(out, "session %s\n", esc(r.ID))
		if r.Label == nil {
			fmt.Fprintln(out, "label   not shown by this server")
		} else {
			fmt.Fprintf(out, "label   %s\n", esc(*r.Label))
		}
		for _, u := range r.Unavailable {
			fmt.Fprintf(out, "refuses %s: %s\n", esc(u.Tool), esc(u.Why))
		}
	case *mcp.ListResourcesResult:
		if len(r.Resources) == 0 {
			fmt.Fprintln(out, "no resources")
		}
		for _, rs := range r.Resources {
			fmt.Fprintf(out, "%s\t%s\n", esc(rs.URI), esc(rs.Name))
		}
	case *mcp.ReadResourceResult:
		for _, rc := range r.Contents {
			if rc.Text != "" {
				fmt.Fprintf(out, "%s\n", esc(rc.Text))
			} else {
				fmt.Fprintf(out, "(%s: %d bytes of %s)\n", esc(rc.URI), len(rc.Blob), esc(rc.MIMEType))
			}
		}
	default:
		b, _ := json.Marshal(res)
		fmt.Fprintf(out, "%s\n", b)
	}
}

// contentText is a result's content as text: its text items, and a note
// for each item of another kind.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// metaLabel is the label a result's _meta carries (mcpserve.LabelMeta),
// as "{conf}/{integ}".
func metaLabel(m mcp.Meta) (string, bool) {
	v, ok := m[mcpserve.LabelMeta]
	if !ok {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	var l kindapi.Label
	if json.Unmarshal(b, &l) != nil {
		return "", false
	}
	return l.String(), true
}

// sessionInfo is what "session" shows: the session's id, its label as
// the server's tools/list carries it (mandate mcp serve does; another
// server may not), and the tools that label refuses.
type sessionInfo struct {
	ID          string            `json:"session"`
	Label       *string           `json:"label"`
	Unavailable []unavailableTool `json:"refuses"`
}

type unavailableTool struct {
	Tool string `json:"tool"`
	Why  string `json:"why"`
}

func sessionView(id string, lr *mcp.ListToolsResult) *sessionInfo {
	s := &sessionInfo{ID: id, Unavailable: []unavailableTool{}}
	if l, ok := metaLabel(lr.Meta); ok {
		s.Label = &l
	}
	for _, t := range lr.Tools {
		if why, ok := t.Meta[mcpserve.UnavailableMeta].(string); ok {
			s.Unavailable = append(s.Unavailable, unavailableTool{Tool: t.Name, Why: why})
		}
	}
	sort.Slice(s.Unavailable, func(i, j int) bool { return s.Unavailable[i].Tool < s.Unavailable[j].Tool })
	return s
}
