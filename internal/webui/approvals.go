package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/kernel"
)

// The approvals pages: GET /approvals lists the pending approvals of the
// state directory (and the recent answered ones), GET /approvals/ID shows
// one whole, with Approve and Refuse buttons whose script POSTs
// /approvals/ID/answer (the one path the guard lets a POST reach, see
// guard.go). This is the only thing the UI changes, and only in
// STATE/approvals.db, which it opens (for writing) only once a waiting
// process created it.

// UIFile is where a running mandate ui publishes its address in the state
// directory, for ApprovalURL.
const UIFile = "ui.json"

type uiInfo struct {
	Addr string `json:"addr"`
	PID  int    `json:"pid"`
}

// Publish writes STATE/ui.json ({"addr", "pid"}: this process), 0600, by
// an atomic rename, so that a process waiting for an approval can say
// where to answer it. The returned function removes the file, if it is
// still this process's.
func Publish(stateDir, addr string) (unpublish func(), err error) {
	b, err := json.Marshal(uiInfo{Addr: addr, PID: os.Getpid()})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, UIFile)
	tmp, err := os.CreateTemp(stateDir, ".ui-*.json")
	if err != nil {
		return nil, err
	}
	if _, err = tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	return func() {
		if info, ok := readUIInfo(stateDir); ok && info.PID == os.Getpid() {
			os.Remove(path)
		}
	}, nil
}

func readUIInfo(stateDir string) (uiInfo, bool) {
	b, err := os.ReadFile(filepath.Join(stateDir, UIFile))
	if err != nil || len(b) > 4096 {
		return uiInfo{}, false
	}
	var info uiInfo
	if json.Unmarshal(b, &info) != nil {
		return uiInfo{}, false
	}
	return info, true
}

// ApprovalURL is the URL of approval id's page on the mandate ui serving
// stateDir, http://ADDR/approvals/ID, when one is running (it published
// its address and its process is alive); false otherwise. The URL carries
// no token: only a browser that opened the URL mandate ui printed (and so
// holds its cookie) sees the page; anyone else gets 401.
func ApprovalURL(stateDir, id string) (string, bool) {
	if !approvals.ValidID(id) {
		return "", false
	}
	info, ok := readUIInfo(stateDir)
	if !ok || !approvals.ProcessAlive(info.PID) {
		return "", false
	}
	host, port, err := net.SplitHostPort(info.Addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || port == "" {
		return "", false
	}
	return "http://" + net.JoinHostPort(host, port) + "/approvals/" + id, true
}

// approvalsStore returns the state directory's approvals store, opened
// the first time its file exists; an error wrapping fs.ErrNotExist while
// it does not (no process has asked anything yet).
func (s *stores) approvalsStore() (*approvals.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.approvals != nil {
		return s.approvals, nil
	}
	if s.src != nil {
		return nil, errNoStateDir
	}
	if _, err := os.Stat(s.approvalsPath()); err != nil {
		return nil, err
	}
	st, err := approvals.Open(s.dir)
	if err != nil {
		return nil, err
	}
	s.approvals = st
	return st, nil
}

func (s *stores) approvalsPath() string { return s.path(approvals.FileName) }

// listApprovals lists approvals; none (no file yet) is an empty list.
func (s *stores) listApprovals(ctx context.Context, o approvals.ListOptions) ([]approvals.Approval, error) {
	st, err := s.approvalsStore()
	if notExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return st.List(ctx, o)
}

// approvalLine is an approval in a list (without its details, which may
// be large).
type approvalLine struct {
	ID        string    `json:"id"`
	Run       string    `json:"run"`
	Task      string    `json:"task"`
	Principal string    `json:"principal"`
	Summary   string    `json:"summary"`
	Kind      string    `json:"kind"`
	CapName   string    `json:"cap_name"`
	Waiter    string    `json:"waiter"`
	State     string    `json:"state"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	Answered  time.Time `json:"answered,omitzero"`
	Channel   string    `json:"channel,omitempty"`
	By        string    `json:"by,omitempty"`
	Note      string    `json:"note,omitempty"`
}

func newApprovalLine(a approvals.Approval) approvalLine {
	r := a.Request
	return approvalLine{ID: esc(a.ID), Run: esc(a.Run), Task: esc(r.Task), Principal: esc(r.Principal), Summary: esc(r.Summary),
		Kind: esc(r.Kind), CapName: esc(r.CapName), Waiter: esc(a.Waiter), State: esc(a.State),
		Created: a.Created, Expires: a.Expires, Answered: a.Answered, Channel: esc(a.Channel), By: esc(a.By), Note: esc(a.Note)}
}

func approvalLines(as []approvals.Approval) []approvalLine {
	out := make([]approvalLine, 0, len(as))
	for _, a := range as {
		out = append(out, newApprovalLine(a))
	}
	return out
}

// approvalsView is GET /api/approvals.
type approvalsView struct {
	Pending  []approvalLine `json:"pending"`
	Answered []approvalLine `json:"answered"` // the recent ones
	Note     string         `json:"note,omitempty"`
}

// recentAnswered is how many answered approvals the list shows.
const recentAnswered = 50

func (s *Server) apiApprovals(w http.ResponseWriter, r *http.Request) {
	all, err := s.stores.listApprovals(r.Context(), approvals.ListOptions{Limit: 500})
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return
	}
	v := approvalsView{Pending: []approvalLine{}, Answered: []approvalLine{}}
	for _, a := range all {
		switch {
		case a.Pending():
			v.Pending = append(v.Pending, newApprovalLine(a))
		case len(v.Answered) < recentAnswered:
			v.Answered = append(v.Answered, newApprovalLine(a))
		}
	}
	switch {
	case s.o.Runs != nil:
		v.Note = "A fleet's runs ask no person: a node refuses a use that needs a person's yes. Approvals are answered in the state directory of mandate run --approve wait or mandate mcp serve (mandate ui --state-dir there)."
	case len(all) == 0:
		v.Note = "No approval asked yet in this state directory. A use that needs a person's yes shows here while mandate run --approve wait or mandate mcp serve waits for it."
	}
	writeJSON(w, http.StatusOK, v)
}

// detailView is one part of the effect, whole (escaped, never cut).
type detailView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Bytes int    `json:"bytes"`
}

// approvalView is GET /api/approvals/{id}: the whole effect.
type approvalView struct {
	approvalLine
	PID     int          `json:"pid"`
	Module  string       `json:"module"`
	Cap     string       `json:"cap"`
	Op      string       `json:"op"`
	Details []detailView `json:"details"`
	Reasons []string     `json:"reasons"`
	Digest  string       `json:"digest"`
	// Nonce answers the approval once, while it is pending; empty after.
	Nonce string `json:"nonce,omitempty"`
}

func newApprovalView(a approvals.Approval, nonce string) approvalView {
	r := a.Request
	v := approvalView{approvalLine: newApprovalLine(a), PID: a.PID, Module: esc(r.Module), Cap: esc(r.Cap), Op: esc(r.Op),
		Details: make([]detailView, 0, len(r.Details)), Reasons: escAll(r.Reasons), Digest: esc(r.Digest), Nonce: nonce}
	for _, d := range r.Details {
		v.Details = append(v.Details, detailView{Name: esc(d.Name), Value: esc(d.Value), Bytes: len(d.Value)})
	}
	return v
}

func (s *Server) approvalPage(w http.ResponseWriter, r *http.Request) {
	if !approvals.ValidID(r.PathValue("id")) {
		refuse(w, http.StatusNotFound, "not an approval id")
		return
	}
	serveAsset(w, "approval.html")
}

// approval returns the approval the request names, or writes the error.
func (s *Server) approval(w http.ResponseWriter, r *http.Request) (*approvals.Store, approvals.Approval, bool) {
	st, err := s.stores.approvalsStore()
	if notExist(err) {
		jsonError(w, http.StatusNotFound, errors.New("no such approval: none was asked in this state directory"))
		return nil, approvals.Approval{}, false
	}
	if err != nil {
		jsonError(w, http.StatusInternalServerError, err)
		return nil, approvals.Approval{}, false
	}
	a, err := st.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, approvals.ErrNotFound) {
			code = http.StatusNotFound
		}
		jsonError(w, code, err)
		return nil, approvals.Approval{}, false
	}
	return st, a, true
}

func (s *Server) apiApproval(w http.ResponseWriter, r *http.Request) {
	st, a, ok := s.approval(w, r)
	if !ok {
		return
	}
	nonce := ""
	if a.Pending() {
		n, err := st.Nonce(r.Context(), a.ID)
		if err == nil {
			nonce = n
		} else if a, err = st.Get(r.Context(), a.ID); err != nil { // answered meanwhile
			jsonError(w, http.StatusInternalServerError, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, newApprovalView(a, nonce))
}

// maxAnswerBody bounds the body of POST /approvals/ID/answer.
const maxAnswerBody = 4 << 10

// maxUserAgent bounds the User-Agent recorded with a web answer.
const maxUserAgent = 200

// webBy names who acts on a web page (an approval's answer, a client's
// reset): "web page, client ADDR, USER-AGENT" (escaped, bounded).
func webBy(r *http.Request) string {
	ua := r.UserAgent()
	if len(ua) > maxUserAgent {
		ua = ua[:maxUserAgent] + "..."
	}
	return "web page, client " + r.RemoteAddr + ", " + esc(ua)
}

type answerBody struct {
	Nonce string `json:"nonce"`
	Yes   *bool  `json:"yes"`
}

// answer serves POST /approvals/{id}/answer, {"nonce": "...", "yes": bool},
// which the guard let through (token cookie, own Origin, same-origin
// fetch, JSON, a small body).
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var body answerBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAnswerBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Yes == nil || body.Nonce == "" {
		jsonError(w, http.StatusBadRequest, errors.New(`the answer must be JSON {"nonce": "...", "yes": true or false}`))
		return
	}
	st, a, ok := s.approval(w, r)
	if !ok {
		return
	}
	by := webBy(r)
	got, err := st.Answer(r.Context(), a.ID, kernel.Answer{Yes: *body.Yes, Channel: kernel.ChannelWeb, By: by}, body.Nonce)
	switch {
	case errors.Is(err, approvals.ErrNonce):
		s.logger.Warn("an approval answer with a wrong nonce", "approval", a.ID, "client", r.RemoteAddr)
		jsonError(w, http.StatusForbidden, fmt.Errorf("refused: %w", err))
		return
	case errors.Is(err, approvals.ErrNotPending):
		jsonError(w, http.StatusConflict, err)
		return
	case err != nil:
		jsonError(w, http.StatusInternalServerError, err)
		return
	}
	s.logger.Info("approval answered on the web page", "approval", got.ID, "state", got.State, "by", by)
	writeJSON(w, http.StatusOK, newApprovalView(got, ""))
}

// answerPath reports whether p is /approvals/ID/answer, the one path a
// POST may reach.
func answerPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/approvals/")
	if !ok {
		return false
	}
	id, ok := strings.CutSuffix(rest, "/answer")
	return ok && approvals.ValidID(id)
}
