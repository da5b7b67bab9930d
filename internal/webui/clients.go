package webui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// The clients pages: GET /clients lists the MCP clients of "mandate mcp
// serve" that STATE/mcp-clients.db knows (each one's label, when it last
// rose, its sessions), GET /clients/NAME shows one: its label, its history
// (raises with the session and tool, resets with who and why, expiries)
// and its sessions (the runs whose module is "mcp:NAME"). Its Reset button
// POSTs /clients/NAME/reset, the second path the guard lets a POST reach,
// guarded as an approval's answer is, with a one-time nonce this process
// keeps in memory. The reset is mcpclients.ResetAudited, as mandate mcp
// reset makes it: the client's history and the audit log record it. The
// store is read read-only, opened the first time it exists; it is opened
// for writing only for a reset, and never created.

// sessionModule is the module of an MCP session's run, before its
// client's name (host.SessionModule + ":", which the UI may not import).
const sessionModule = "mcp:"

// clientsStore returns the MCP clients store, opened read-only the first
// time it exists; an error wrapping fs.ErrNotExist while it does not.
func (s *stores) clientsStore() (*mcpclients.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.clients != nil {
		return s.clients, nil
	}
	if s.src != nil {
		return nil, errNoStateDir
	}
	st, err := mcpclients.OpenReadOnly(s.dir)
	if err != nil {
		return nil, err
	}
	s.clients = st
	return st, nil
}

func (s *stores) clientsPath() string { return s.path(mcpclients.FileName) }

// listClients lists the clients; none (no file yet) is an empty list.
func (s *stores) listClients(ctx context.Context) ([]mcpclients.State, error) {
	st, err := s.clientsStore()
	if notExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return st.Clients(ctx)
}

// clientLine is a client in the list.
type clientLine struct {
	Name     string    `json:"name"`
	Label    labelView `json:"label"`
	Raised   time.Time `json:"raised,omitzero"` // when its label last rose; zero: not since its last reset or expiry
	Sessions int       `json:"sessions"`
}

func newClientLine(c mcpclients.State, sessions int) clientLine {
	return clientLine{Name: esc(c.Client), Label: newLabel(c.Label), Raised: c.Raised, Sessions: sessions}
}

// clientsView is GET /api/clients.
type clientsView struct {
	Clients []clientLine `json:"clients"`
	Path    string       `json:"path"`
	Note    string       `json:"note,omitempty"`
}

// sessionsOf returns the runs of client's sessions, newest first.
func sessionsOf(runs []runstore.Summary, client string) []runstore.Summary {
	var out []runstore.Summary
	for _, r := range runs {
		if r.Module == sessionModule+client {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) apiClients(w http.ResponseWriter, r *http.Request) {
	cs, err := s.stores.listClients(r.Context())
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return
	}
	runs, err := s.stores.list(r.Context())
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return
	}
	count := map[string]int{}
	for _, run := range runs {
		if c, ok := strings.CutPrefix(run.Module, sessionModule); ok {
			count[c]++
		}
	}
	v := clientsView{Clients: make([]clientLine, 0, len(cs)), Path: esc(s.stores.clientsPath())}
	for _, c := range cs {
		v.Clients = append(v.Clients, newClientLine(c, count[c.Client]))
	}
	switch {
	case s.o.Runs != nil:
		v.Note = "A fleet's UI shows no MCP clients: they are known in the state directory of mandate mcp serve (mandate ui --state-dir there)."
	case len(cs) == 0:
		v.Note = "No MCP client known yet in this state directory. A client of mandate mcp serve shows here once a session of it has been shown a result."
	}
	writeJSON(w, http.StatusOK, v)
}

// eventView is one entry of a client's history.
type eventView struct {
	Seq   int64     `json:"seq"`
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
	Run   string    `json:"run,omitempty"`
	Tool  string    `json:"tool,omitempty"`
	Label labelView `json:"label"` // raise: what was added; reset, expiry: what was dropped
	By    string    `json:"by,omitempty"`
	Why   string    `json:"why,omitempty"`
}

// clientView is GET /api/clients/{name}.
type clientView struct {
	clientLine
	History []eventView `json:"history"`
	Runs    []runLine   `json:"runs"` // its sessions, newest first
	// Nonce resets the label once, within nonceTTL.
	Nonce string `json:"nonce,omitempty"`
}

// client reads client name's state, history and sessions; false (and
// the error written) when the name is not a client's or the store knows
// nothing of it.
func (s *Server) client(w http.ResponseWriter, r *http.Request, name string) (clientView, bool) {
	if !mcpclients.ValidName(name) {
		jsonError(w, http.StatusNotFound, errors.New("not a client name"))
		return clientView{}, false
	}
	st, err := s.stores.clientsStore()
	if notExist(err) {
		jsonError(w, http.StatusNotFound, errors.New("no such client: no MCP client is known in this state directory yet"))
		return clientView{}, false
	}
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return clientView{}, false
	}
	ctx := r.Context()
	c, err := st.Label(ctx, name)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return clientView{}, false
	}
	h, err := st.History(ctx, name)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return clientView{}, false
	}
	runs, err := s.stores.list(ctx)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return clientView{}, false
	}
	sessions := sessionsOf(runs, name)
	if c.Label.IsZero() && c.Raised.IsZero() && len(h) == 0 && len(sessions) == 0 {
		jsonError(w, http.StatusNotFound, fmt.Errorf("no such client: %s", name))
		return clientView{}, false
	}
	v := clientView{clientLine: newClientLine(c, len(sessions)), History: make([]eventView, 0, len(h)), Runs: make([]runLine, 0, len(sessions))}
	for _, e := range h {
		v.History = append(v.History, eventView{Seq: e.Seq, Time: e.Time, Event: esc(e.Event), Run: esc(e.Run), Tool: esc(e.Tool),
			Label: newLabel(e.Label), By: esc(e.By), Why: esc(e.Why)})
	}
	for _, run := range sessions {
		v.Runs = append(v.Runs, newRunLine(run))
	}
	return v, true
}

func (s *Server) clientPage(w http.ResponseWriter, r *http.Request) {
	if !mcpclients.ValidName(r.PathValue("name")) {
		refuse(w, http.StatusNotFound, "not a client name")
		return
	}
	serveAsset(w, "client.html")
}

func (s *Server) apiClient(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, ok := s.client(w, r, name)
	if !ok {
		return
	}
	n, err := s.resets.issue(name)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return
	}
	v.Nonce = n
	writeJSON(w, http.StatusOK, v)
}

// maxReason bounds the reason of a reset, in bytes.
const maxReason = 500

type resetBody struct {
	Nonce  string `json:"nonce"`
	Reason string `json:"reason"`
}

// reset serves POST /clients/{name}/reset, {"nonce": "...", "reason":
// "..."}, which the guard let through (token cookie, own Origin,
// same-origin fetch, JSON, a small body).
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var body resetBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAnswerBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Nonce == "" {
		jsonError(w, http.StatusBadRequest, errors.New(`a reset must be JSON {"nonce": "...", "reason": "..."}`))
		return
	}
	why := strings.TrimSpace(body.Reason)
	switch {
	case why == "":
		jsonError(w, http.StatusBadRequest, errors.New("a reason is required: it is recorded with the reset"))
		return
	case len(why) > maxReason:
		jsonError(w, http.StatusBadRequest, fmt.Errorf("the reason has %d bytes, more than %d", len(why), maxReason))
		return
	}
	if !s.resets.consume(body.Nonce, name) {
		s.logger.Warn("a client reset with a wrong or used nonce", "client", esc(name), "remote", r.RemoteAddr)
		jsonError(w, http.StatusForbidden, errors.New("refused: the nonce is wrong, used or expired; reload the client's page"))
		return
	}
	if _, ok := s.client(w, r, name); !ok {
		return
	}
	by := webBy(r)
	before, err := s.resetClient(r.Context(), name, by, why)
	if err != nil {
		s.logger.Error("a client reset on the web page failed", "client", name, "error", err)
		jsonError(w, http.StatusInternalServerError, fmt.Errorf("the reset failed: %w", err))
		return
	}
	s.logger.Info("an MCP client's label reset on the web page", "client", name, "was", before.String(), "by", by)
	v, ok := s.client(w, r, name)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// resetClient opens the clients store for writing (it exists: client
// found it) for this one reset, and resets client's label through
// mcpclients.ResetAudited.
func (s *Server) resetClient(ctx context.Context, client, by, why string) (before kindapi.Label, err error) {
	if _, err := os.Stat(s.stores.clientsPath()); err != nil {
		return before, err
	}
	st, err := mcpclients.Open(s.o.StateDir)
	if err != nil {
		return before, err
	}
	defer st.Close()
	return mcpclients.ResetAudited(ctx, s.o.StateDir, st, client, by, why)
}

// nonceTTL is how long a client page's reset nonce is good for.
const nonceTTL = 10 * time.Minute

// maxNonces bounds the nonces kept: past it, the oldest goes.
const maxNonces = 256

// resetNonces are the one-time nonces of the reset buttons: 256 random
// bits each, bound to a client, issued with each view of its page and
// consumed by a reset (or dropped after nonceTTL).
type resetNonces struct {
	mu sync.Mutex            // guards m
	m  map[string]nonceEntry // nonce -> what it resets
}

type nonceEntry struct {
	client string
	issued time.Time
}

// issue returns a new nonce for client.
func (n *resetNonces) issue(client string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webui: a nonce: %w", err)
	}
	nonce := hex.EncodeToString(b[:])
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]nonceEntry{}
	}
	var oldest string
	for k, e := range n.m {
		if now.Sub(e.issued) > nonceTTL {
			delete(n.m, k)
		} else if oldest == "" || e.issued.Before(n.m[oldest].issued) {
			oldest = k
		}
	}
	if len(n.m) >= maxNonces {
		delete(n.m, oldest)
	}
	n.m[nonce] = nonceEntry{client: client, issued: now}
	return nonce, nil
}

// consume reports whether nonce was issued for client within nonceTTL,
// and makes it unusable from now on.
func (n *resetNonces) consume(nonce, client string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.m[nonce]
	if !ok {
		return false
	}
	delete(n.m, nonce)
	return e.client == client && time.Since(e.issued) <= nonceTTL
}

// resetPath reports whether p is /clients/NAME/reset, a path a POST may
// reach.
func resetPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/clients/")
	if !ok {
		return false
	}
	name, ok := strings.CutSuffix(rest, "/reset")
	return ok && mcpclients.ValidName(name)
}
