package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// MCP clients. A session belongs to a client: over HTTP the client a
// bearer token names (--token-file), over stdio --client. The client's
// label (what its model has been shown, in any session) is kept in the
// state directory (internal/mcpclients) and falls only by a person's act
// ("mandate mcp reset") or the policy's label_ttl.

// The clients a session belongs to when nothing names one.
const (
	stdioClient   = "stdio"   // over stdio, without --client
	localClient   = "local"   // over HTTP without --token-file
	defaultClient = "default" // a token file holding one bare token
)

// minTokenLen is the shortest token a CLIENT TOKEN line may have.
const minTokenLen = 16

// maxClientName is the longest client name.
const maxClientName = mcpclients.MaxName

// validClientName reports whether name is 1 to maxClientName of
// A-Z a-z 0-9 _ . -
func validClientName(name string) bool { return mcpclients.ValidName(name) }

// clientToken is one client of a token file.
type clientToken struct {
	client string
	// principal, when set, is the only principal the client's sessions
	// may act for (a third field, CLIENT TOKEN PRINCIPAL).
	principal string
	token     [sha256.Size]byte // the token's SHA-256: compared in constant time
	short     bool              // a bare token shorter than minTokenLen
}

// parseTokenFile reads a token file: lines "CLIENT TOKEN [PRINCIPAL]"
// (PRINCIPAL pins the client to the one principal its sessions may act
// for: a server whose policy acts for another refuses them; blank lines and
// lines beginning with # are ignored), or, as before clients were named,
// one bare token: the client "default". A client name is 1 to 64 of
// A-Z a-z 0-9 _ . -; a named client's token has at least 16 characters
// (a bare token any, as before: serveHTTP warns when it is short); no two
// clients share a name or a token.
func parseTokenFile(data []byte) ([]clientToken, error) {
	type line struct {
		n      int
		fields []string
	}
	var lines []line
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, line{i + 1, strings.Fields(l)})
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("holds no token (want lines CLIENT TOKEN, or one bare token)")
	}
	printable := func(tok string) error {
		for _, c := range tok {
			if c <= ' ' || c >= 0x7f {
				return fmt.Errorf("holds the character %q: a token is printable ASCII", c)
			}
		}
		return nil
	}
	if len(lines) == 1 && len(lines[0].fields) == 1 {
		tok := lines[0].fields[0]
		if err := printable(tok); err != nil {
			return nil, fmt.Errorf("line %d: the token %v", lines[0].n, err)
		}
		return []clientToken{{client: defaultClient, token: sha256.Sum256([]byte(tok)), short: len(tok) < minTokenLen}}, nil
	}
	var out []clientToken
	names := map[string]int{}
	tokens := map[[sha256.Size]byte]int{}
	for _, l := range lines {
		switch len(l.fields) {
		case 2, 3:
		case 1:
			return nil, fmt.Errorf("line %d: a bare token is allowed only as the file's one line; name its client: CLIENT TOKEN", l.n)
		default:
			return nil, fmt.Errorf("line %d: want CLIENT TOKEN [PRINCIPAL], got %d fields", l.n, len(l.fields))
		}
		name, tok := l.fields[0], l.fields[1]
		if !validClientName(name) {
			return nil, fmt.Errorf("line %d: client name %q must be 1 to %d of the characters A-Z a-z 0-9 _ . -", l.n, kindapi.Printable(name), maxClientName)
		}
		if first, dup := names[name]; dup {
			return nil, fmt.Errorf("line %d: client %s is named twice (first on line %d)", l.n, name, first)
		}
		if err := printable(tok); err != nil {
			return nil, fmt.Errorf("line %d: client %s's token %v", l.n, name, err)
		}
		if len(tok) < minTokenLen {
			return nil, fmt.Errorf("line %d: client %s's token has %d characters, fewer than %d", l.n, name, len(tok), minTokenLen)
		}
		sum := sha256.Sum256([]byte(tok))
		if first, dup := tokens[sum]; dup {
			return nil, fmt.Errorf("line %d: client %s has the token of line %d: each client has its own", l.n, name, first)
		}
		names[name], tokens[sum] = l.n, l.n
		ct := clientToken{client: name, token: sum}
		if len(l.fields) == 3 {
			if ct.principal = l.fields[2]; printable(ct.principal) != nil {
				return nil, fmt.Errorf("line %d: client %s's principal %q is not printable ASCII", l.n, name, kindapi.Printable(ct.principal))
			}
		}
		out = append(out, ct)
	}
	return out, nil
}

// clientOf is the client whose token r carries ("Authorization: Bearer
// TOKEN"), compared with every client's in constant time; false when none.
func clientOf(tokens []clientToken, r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false
	}
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range tokens {
		if subtle.ConstantTimeCompare(sum[:], tokens[i].token[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return tokens[found].client, true
}

// pinned is the principal client is pinned to in tokens, "" when none.
func pinned(tokens []clientToken, client string) string {
	for _, t := range tokens {
		if t.client == client {
			return t.principal
		}
	}
	return ""
}

// clientKey keys the request's client in its context.
type clientKey struct{}

// clientLabel is a session's client's label, in the state directory's
// store; a raise is taken up at once by the client's other live sessions
// of this process (those of other processes take it up at their next call
// or tools/list).
type clientLabel struct {
	s      *mcpServer
	client string
	self   *mcpSession // set once the session is made, before it serves
}

func (c *clientLabel) Label(ctx context.Context) (kindapi.Label, error) {
	st, err := c.s.clients.Label(ctx, c.client)
	return st.Label, err
}

func (c *clientLabel) Raise(ctx context.Context, tool string, l kindapi.Label) error {
	after, err := c.s.clients.Raise(ctx, c.client, mcpclients.Raise{Run: c.self.hs.ID(), Tool: tool, Label: l})
	if err != nil {
		return err
	}
	c.s.mu.Lock()
	var peers []*mcpSession
	for m := range c.s.byClient[c.client] {
		if m != c.self {
			peers = append(peers, m)
		}
	}
	c.s.mu.Unlock()
	if len(peers) > 0 {
		c.s.logger.Info("the client's label rose: its live sessions take it up", "client", c.client, "label", after.String(), "sessions", len(peers))
	}
	for _, m := range peers {
		go func() {
			if err := m.Sync(context.Background()); err != nil {
				c.s.logger.Warn("a session could not take up its client's label", "run", m.hs.ID(), "error", err)
			}
		}()
	}
	return nil
}

const mcpResetHelp = `Usage: mandate mcp reset CLIENT --reason WHY [--state-dir DIR]

Drops the label an MCP client has gathered (what its model has been
shown, kept across its sessions in STATE/mcp-clients.db), so that its next
sessions may again use the tools that label refused. A person's act: it
must be confirmed on the controlling terminal (/dev/tty), and is refused
without one (a model's own shell tool usually has none). It is recorded in
the client's history and in the audit log, with who (user, uid, terminal)
and why. Sessions of CLIENT started after the reset begin unlabelled; a
session live now keeps its label until it ends (a kernel label never
falls).
`

// runMCPReset is "mandate mcp reset CLIENT --reason WHY".
func runMCPReset(e *env, c *command, args []string) int {
	rc := *c
	rc.help = mcpResetHelp // for --help
	c = &rc
	fs := flagSet("mcp reset")
	reason := fs.String("reason", "", "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	client, code, ok := e.oneArg(c, pos, "the client: mandate mcp reset CLIENT --reason WHY")
	if !ok {
		return code
	}
	if !validClientName(client) {
		return e.usageError(c, "client name %q must be 1 to %d of the characters A-Z a-z 0-9 _ . -", kindapi.Printable(client), maxClientName)
	}
	why := strings.TrimSpace(*reason)
	if why == "" {
		return e.usageError(c, "--reason WHY is required: it is recorded with the reset")
	}
	state, err := e.stateDir(*stateFlag)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		e.errorf("mcp reset refused: no terminal to confirm on (/dev/tty: %v). A reset lets the client's next sessions "+
			"use tools its label refuses: a person confirms it at a terminal, which a model's own shell tool usually lacks. Nothing changed.", err)
		return exitUsage
	}
	defer tty.Close()
	ctx := e.context()
	st, err := mcpclients.Open(state)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer st.Close()
	cur, err := st.Label(ctx, client)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	shown := "nothing labelled"
	if !cur.Label.IsZero() {
		shown = cur.Label.String() + ", last raised " + cur.Raised.Local().Format(time.RFC3339)
	}
	fmt.Fprintf(tty, "MCP client %q has been shown %s.\nReset its label for the sessions it starts from now on (live ones keep theirs)?\nReason: %s\nType the client's name to confirm: ",
		client, shown, kindapi.EscapeText(why))
	answer, _ := bufio.NewReader(tty).ReadString('\n')
	if strings.TrimSpace(answer) != client {
		fmt.Fprintln(tty, "Not confirmed: nothing changed.")
		e.errorf("mcp reset: not confirmed on the terminal; nothing changed")
		return exitTaskFailed
	}
	by := personAt(ttyName())
	before, err := mcpclients.ResetAudited(ctx, state, st, client, by, why)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "The label of MCP client %q is reset (it was %v).\nSessions of %s started from now on begin unlabelled; "+
		"a session live now keeps its label until it ends (a kernel label never falls).\nRecorded in %s and the audit log %s, by %s.\n",
		client, before, client, st.Path(), auditPath(state), by)
	return exitOK
}

// noOAuth answers the OAuth discovery of a client that was refused
// (unauthorized): every /.well-known/ address is a 404 saying that the
// server takes a bearer token and has no OAuth, with or without a token.
// Answered 401 like any other address, a client such as the MCP Inspector
// took the server for an OAuth server and ended in a refused client
// registration, never naming the token. True when it answered.
func noOAuth(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, "/.well-known/") {
		return false
	}
	http.Error(w, "not found: this MCP server has no OAuth; it takes the bearer token of a line of its --token-file (Authorization: Bearer TOKEN)", http.StatusNotFound)
	return true
}

// unauthorized refuses a request without a token of the token file, and
// says which token the server wants (RFC 6750: invalid_token when one was
// sent).
func unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mandate"`)
		http.Error(w, "unauthorized: send Authorization: Bearer TOKEN, with the token of a line of the server's --token-file (this server has no OAuth)", http.StatusUnauthorized)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="mandate", error="invalid_token"`)
	http.Error(w, "unauthorized: the bearer token is none of the server's --token-file (Authorization: Bearer TOKEN; this server has no OAuth)", http.StatusUnauthorized)
}
