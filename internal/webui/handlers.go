package webui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

// The pages are static HTML that load app.js and style.css: they carry no
// data. app.js reads the JSON below and builds the page with DOM calls,
// setting every string as text (textContent), never as markup.
//
//go:embed assets
var assetFS embed.FS

// assetTypes are the Content-Types of the embedded assets, by extension;
// an asset of another type is not served.
var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /{$}", s.page("index.html"))
	s.mux.HandleFunc("GET /runs/{id}", s.runPage)
	s.mux.HandleFunc("GET /assets/{name}", s.asset)
	s.mux.HandleFunc("GET /api/runs", s.apiRuns)
	s.mux.HandleFunc("GET /api/runs/{id}", s.apiRun)
	s.mux.HandleFunc("GET /api/runs/{id}/graph.svg", s.apiGraph)
	s.mux.HandleFunc("GET /api/events", s.events)
	s.mux.HandleFunc("GET /approvals", s.page("approvals.html"))
	s.mux.HandleFunc("GET /approvals/{id}", s.approvalPage)
	s.mux.HandleFunc("POST /approvals/{id}/answer", s.answer)
	s.mux.HandleFunc("GET /api/approvals", s.apiApprovals)
	s.mux.HandleFunc("GET /api/approvals/{id}", s.apiApproval)
	s.mux.HandleFunc("GET /clients", s.page("clients.html"))
	s.mux.HandleFunc("GET /clients/{name}", s.clientPage)
	s.mux.HandleFunc("POST /clients/{name}/reset", s.reset)
	s.mux.HandleFunc("GET /api/clients", s.apiClients)
	s.mux.HandleFunc("GET /api/clients/{name}", s.apiClient)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuse(w, http.StatusNotFound, "not found")
	})
}

// page serves an embedded HTML page.
func (s *Server) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { serveAsset(w, name) }
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != "last" && !runstore.ValidRunID(id) {
		refuse(w, http.StatusNotFound, "not a run id")
		return
	}
	serveAsset(w, "run.html")
}

func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if path.Ext(name) == ".html" { // pages are served at their own paths
		refuse(w, http.StatusNotFound, "not found")
		return
	}
	serveAsset(w, name)
}

func serveAsset(w http.ResponseWriter, name string) {
	ctype, ok := assetTypes[path.Ext(name)]
	if !ok || strings.ContainsAny(name, "/\\") {
		refuse(w, http.StatusNotFound, "not found")
		return
	}
	b, err := fs.ReadFile(assetFS, "assets/"+name)
	if err != nil {
		refuse(w, http.StatusNotFound, "not found")
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Write(b)
}

// writeJSON writes v. encoding/json writes <, > and & as \u escapes, so
// no string in it reads as markup even to a browser that sniffed it (it
// may not: nosniff), and the strings in it went through esc.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		refuse(w, http.StatusInternalServerError, "encoding the response failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

type errorView struct {
	Error string `json:"error"`
}

func jsonError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, errorView{Error: esc(err.Error())})
}

func truthy(s string) bool {
	switch strings.ToLower(s) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := r.URL.Query()
	f := runsFilter{Principal: q.Get("principal"), State: q.Get("state"), Denials: truthy(q.Get("denials"))}
	runs, err := s.listRuns(r.Context())
	if err != nil {
		s.logger.Warn("listing runs", "error", err)
		jsonError(w, http.StatusInternalServerError, err)
		return
	}
	v := runsView{StateDir: esc(s.o.StateDir), Total: len(runs),
		Filter: runsFilter{Principal: esc(f.Principal), State: esc(f.State), Denials: f.Denials}, Now: time.Now().UTC()}
	v.Runs, v.Principals, v.States = filterRuns(runs, f)
	switch {
	case len(runs) == 0 && s.o.Runs != nil:
		v.Note = "No run of this fleet has started on a node yet: submit one with mandate run --nats URLS MANIFEST."
	case len(runs) == 0:
		v.Note = "No runs recorded yet in this state directory: run a task with mandate run MANIFEST; it shows here as it starts."
		if s.stores.legacyRecords() {
			v.Note = "This state directory holds run records of an earlier Mandate: run mandate runs once to import them (the UI writes nothing)."
		}
	}
	if s.o.Runs != nil {
		v.Source = esc(s.o.Runs.Name())
	}
	if pending, err := s.stores.listApprovals(r.Context(), approvals.ListOptions{Pending: true}); err != nil {
		s.logger.Warn("listing approvals", "error", err)
	} else {
		v.PendingApprovals = len(pending)
	}
	v.Took = time.Since(start)
	writeJSON(w, http.StatusOK, v)
}

// listRuns lists the runs with what each could do: the state
// directory's (its root capabilities in one query), or the RunSource's.
func (s *Server) listRuns(ctx context.Context) ([]SourceRun, error) {
	if s.o.Runs != nil {
		return s.o.Runs.List(ctx)
	}
	runs, err := s.stores.list(ctx)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	var roots map[string][]kernel.GraphCap
	if st, err := s.stores.runStore(); err == nil {
		if roots, err = st.RootCaps(ctx); err != nil { // the list without what runs could do rather than none
			s.logger.Warn("reading the runs' capabilities", "error", err)
		}
	}
	out := make([]SourceRun, len(runs))
	for i, r := range runs {
		out[i] = SourceRun{Summary: r, Caps: roots[r.ID]}
	}
	return out, nil
}

// record returns the run named by the request's id ("last": the last
// run that ran), and the store it is in (nil for a RunSource's run).
func (s *Server) record(w http.ResponseWriter, r *http.Request) (*runstore.Record, *runstore.Store, bool) {
	id := r.PathValue("id")
	if id == "last" {
		id = ""
	} else if !runstore.ValidRunID(id) {
		jsonError(w, http.StatusNotFound, errors.New("not a run id"))
		return nil, nil, false
	}
	if s.o.Runs != nil {
		rec, err := s.o.Runs.Get(r.Context(), id)
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, runstore.ErrNotFound) || errors.Is(err, runstore.ErrNoRuns) || errors.Is(err, ErrNoRecord) {
				code = http.StatusNotFound
			}
			jsonError(w, code, err)
			return nil, nil, false
		}
		return rec, nil, true
	}
	st, err := s.stores.runStore()
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, runstore.ErrNoRuns) {
			code = http.StatusNotFound
		}
		jsonError(w, code, err)
		return nil, nil, false
	}
	rec, err := st.Get(r.Context(), id)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, runstore.ErrNotFound) || errors.Is(err, runstore.ErrNoRuns) {
			code = http.StatusNotFound
		}
		jsonError(w, code, err)
		return nil, nil, false
	}
	return rec, st, true
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec, st, ok := s.record(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	outs := rec.Outputs
	if st != nil {
		var err error
		if outs, err = st.Outputs(ctx, rec.Run.ID, ""); err != nil {
			jsonError(w, http.StatusInternalServerError, err)
			return
		}
	}
	a := auditView{Path: esc(s.stores.auditPath())}
	var entries []audit.Entry
	log, err := s.stores.auditLog()
	switch {
	case s.o.Runs != nil:
		a.Note = "This run's audit entries are in its node's audit log, and in the copy the node keeps in the fleet (MANDATE_AUDIT): " +
			"mandate audit verify --nats checks every node's copy; mandate audit --run ID --state-dir on the node lists them."
	case notExist(err):
		a.Note = "No audit log in this state directory yet."
	case err != nil:
		a.Note = "The audit log cannot be read: " + err.Error()
	default:
		a.Available = true
		a.Key = log.VerifierKey()
		if entries, err = log.Entries(ctx, audit.Filter{Run: rec.Run.ID}); err != nil {
			a.Available, a.Note = false, "The audit log cannot be read: "+err.Error()
			entries = nil
			break
		}
		ver, stale := s.stores.verify(ctx, log)
		a.Verify = newVerifyView(ver, stale)
		a.coverage(entries)
	}
	a.Note = esc(a.Note)
	v := newRunView(rec, outs, entries)
	entriesShown := v.Audit.Entries
	v.Audit = a
	v.Audit.Entries = entriesShown
	v.Audit.Total = len(entries)
	v.Graph = s.o.Graph != nil
	as, err := s.stores.listApprovals(ctx, approvals.ListOptions{Run: rec.Run.ID, Limit: 200})
	if err != nil {
		s.logger.Warn("listing the run's approvals", "run", rec.Run.ID, "error", err)
	}
	v.Approvals = approvalLines(as)
	v.Took = time.Since(start).Nanoseconds()
	writeJSON(w, http.StatusOK, v)
}

func newVerifyView(v *verification, stale bool) verifyView {
	out := verifyView{Done: true, At: v.at.UTC(), TookNS: v.took.Nanoseconds(), Stale: stale, FirstBad: -1}
	if v.err != nil {
		out.Error = esc(v.err.Error())
	}
	if rep := v.report; rep != nil {
		out.OK = v.err == nil && rep.OK()
		out.Entries, out.TreeSize, out.Checkpoints = rep.Entries, rep.TreeSize, rep.Checkpoints
		out.FirstBad, out.Problem = rep.FirstBad, esc(rep.Problem)
		if rep.Latest != nil {
			out.LatestSize = rep.Latest.Size
			out.LatestHash = rep.Latest.Hash.String()
		}
	}
	return out
}

func (s *Server) apiGraph(w http.ResponseWriter, r *http.Request) {
	if s.o.Graph == nil {
		refuse(w, http.StatusNotFound, "no picture: this build draws none")
		return
	}
	rec, _, ok := s.record(w, r)
	if !ok {
		return
	}
	svg, err := s.graphs.get(r.Context(), rec)
	if err != nil {
		s.logger.Warn("drawing the graph", "run", rec.Run.ID, "error", err)
		refuse(w, http.StatusInternalServerError, "drawing the graph failed: "+esc(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(svg)
}
