package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/runstore"
)

// Live pages. The UI is a separate, read-only process: it learns of a run
// that started, changed (an MCP session's snapshot) or ended by looking at
// the stores' files (size and modification time of each database and its
// -wal, see statSig) every PollInterval while at least one event stream is
// open, and not at all otherwise. When they changed it lists the runs and
// tells every stream which changed; the page then fetches again what it
// shows. A run left "running" by a process that died turns "crashed"
// without any file changing: while a run is running, the list is read
// again every relistEvery whatever the files say. A RunSource (a fleet)
// has no files: its list is read every SourceRelist.

// relistEvery is how often the runs are listed again while one is running.
const relistEvery = 2 * time.Second

// heartbeat is how often an idle stream gets a comment, so that a proxy
// or the browser keeps it open.
const heartbeat = 15 * time.Second

// change is one event: what changed since the last.
type change struct {
	// Runs are the ids of runs started, changed or ended (escaped as
	// every string the pages get).
	Runs []string `json:"runs"`
	// List: the list of runs changed (a run added, or a summary changed).
	List bool `json:"list"`
	// Audit: the audit log changed (entries added, a checkpoint signed).
	Audit bool `json:"audit"`
	// Approvals: an approval was asked, answered, expired or withdrawn.
	Approvals bool `json:"approvals"`
	// Clients: an MCP client's label rose, was reset or expired.
	Clients bool `json:"clients"`
}

func (c *change) merge(o change) {
	seen := map[string]bool{}
	for _, id := range c.Runs {
		seen[id] = true
	}
	for _, id := range o.Runs {
		if !seen[id] {
			c.Runs = append(c.Runs, id)
			seen[id] = true
		}
	}
	c.List = c.List || o.List
	c.Audit = c.Audit || o.Audit
	c.Approvals = c.Approvals || o.Approvals
	c.Clients = c.Clients || o.Clients
}

// client is one open event stream.
type client struct {
	notify chan struct{} // capacity 1: a change is pending

	mu      sync.Mutex
	pending change // protected by mu
}

func (c *client) take() change {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.pending
	c.pending = change{}
	return ch
}

// hub keeps the event streams and polls the stores while there are any.
type hub struct {
	stores   *stores
	interval time.Duration
	max      int
	logger   hclog.Logger

	mu      sync.Mutex
	clients map[*client]bool // protected by mu
	stop    chan struct{}    // closed to stop the poller; nil when none runs; protected by mu
	closed  bool             // protected by mu
	wg      sync.WaitGroup   // the poller
}

func newHub(s *stores, interval time.Duration, max int, logger hclog.Logger) *hub {
	return &hub{stores: s, interval: interval, max: max, logger: logger, clients: map[*client]bool{}}
}

var errFull = errors.New("too many open event streams")

// join adds a stream, starting the poller for the first one: the state it
// compares with is read before join returns, so a change after it is seen.
func (h *hub) join() (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed
	}
	if len(h.clients) >= h.max {
		return nil, errFull
	}
	c := &client{notify: make(chan struct{}, 1)}
	h.clients[c] = true
	if h.stop == nil {
		h.stop = make(chan struct{})
		p := &poller{stores: h.stores}
		p.step(context.Background()) // the state to compare with
		h.wg.Add(1)
		go h.poll(h.stop, p)
	}
	return c, nil
}

// leave removes a stream, stopping the poller after the last one.
func (h *hub) leave(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	if len(h.clients) == 0 && h.stop != nil {
		close(h.stop)
		h.stop = nil
	}
}

// streams is the number of open event streams.
func (h *hub) streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// polling reports whether the poller runs.
func (h *hub) polling() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stop != nil
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	if h.stop != nil {
		close(h.stop)
		h.stop = nil
	}
	h.mu.Unlock()
	h.wg.Wait()
}

func (h *hub) poll(stop <-chan struct{}, p *poller) {
	defer h.wg.Done()
	t := time.NewTicker(h.interval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if ch, ok := p.step(ctx); ok {
			h.broadcast(ch)
		}
	}
}

func (h *hub) broadcast(ch change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		c.mu.Lock()
		c.pending.merge(ch)
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default: // one is pending already: it will carry this too
		}
	}
}

// poller is what the hub compares the stores with.
type poller struct {
	stores   *stores
	started  bool
	runsSig  fileSig
	auditSig fileSig
	apprSig  fileSig
	cliSig   fileSig
	runs     map[string]string // run id -> its summary, as compared
	running  bool              // a run was running at the last list
	listed   time.Time
}

// step looks at the stores and reports what changed since the last step
// (nothing on the first).
func (p *poller) step(ctx context.Context) (change, bool) {
	var ch change
	first := !p.started
	p.started = true
	if s := statSig(p.stores.auditPath()); s != p.auditSig {
		p.auditSig, ch.Audit = s, true
	}
	if s := statSig(p.stores.approvalsPath()); s != p.apprSig {
		p.apprSig, ch.Approvals = s, true
	}
	if s := statSig(p.stores.clientsPath()); s != p.cliSig {
		p.cliSig, ch.Clients = s, true
	}
	filesChanged := false
	if s := statSig(p.stores.runsPath()); s != p.runsSig {
		p.runsSig, filesChanged = s, true
	}
	// A RunSource's list changes with no file: it is read again every
	// SourceRelist.
	relist := filesChanged || p.running && time.Since(p.listed) >= relistEvery
	if p.stores.src != nil {
		relist = first || time.Since(p.listed) >= SourceRelist
	}
	if relist {
		if runs, err := p.stores.list(ctx); err != nil {
			if ctx.Err() == nil {
				p.stores.logger.Warn("listing runs for the event streams", "error", err)
			}
		} else {
			p.listed = time.Now()
			ch.List, ch.Runs = p.compare(runs, filesChanged)
		}
	}
	if first {
		return change{}, false
	}
	return ch, ch.Audit || ch.Approvals || ch.Clients || ch.List || len(ch.Runs) > 0
}

// compare notes runs as the new state and returns whether the list
// changed and which runs did: added, removed, or with another summary;
// when the store's files changed, every running run too (a snapshot can
// change what a summary does not show, a capability's uses).
func (p *poller) compare(runs []runstore.Summary, filesChanged bool) (bool, []string) {
	now := make(map[string]string, len(runs))
	var changed []string
	list := false
	p.running = false
	for _, r := range runs {
		key := fmt.Sprintf("%s|%d|%d|%d|%d|%d|%s", r.State, r.Ended.UnixNano(), r.Exit, r.Tasks, r.Caps, r.Denials, r.Error)
		now[r.ID] = key
		old, ok := p.runs[r.ID]
		switch {
		case !ok || old != key:
			list = true
			changed = append(changed, esc(r.ID))
		case r.State == runstore.StateRunning && filesChanged:
			changed = append(changed, esc(r.ID))
		}
		if r.State == runstore.StateRunning {
			p.running = true
		}
	}
	for id := range p.runs {
		if _, ok := now[id]; !ok {
			list = true
			changed = append(changed, esc(id))
		}
	}
	p.runs = now
	sort.Strings(changed)
	return list, changed
}

// events serves GET /api/events: a server-sent event stream. It sends
// "ready" once its state is taken (the page fetches then what it shows),
// then a "change" event (JSON: change) after each change.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		refuse(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		return
	}
	c, err := s.live.join()
	if errors.Is(err, errFull) {
		w.Header().Set("Retry-After", "10")
		refuse(w, http.StatusServiceUnavailable, "too many open event streams; close a tab")
		return
	}
	if err != nil {
		refuse(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	defer s.live.leave(c)
	// The server's read deadline is for reading requests; a stream lives
	// longer.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\nevent: ready\ndata: {}\n\n"); err != nil {
		return
	}
	fl.Flush()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-beat.C:
			_, err = fmt.Fprint(w, ": still here\n\n")
		case <-c.notify:
			b, _ := json.Marshal(c.take())
			_, err = fmt.Fprintf(w, "event: change\ndata: %s\n\n", b)
		}
		if err != nil {
			return
		}
		fl.Flush()
	}
}
