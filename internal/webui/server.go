package webui

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/runstore"
)

// Options configure a Server. Token, Addr and StateDir or Runs are
// required.
type Options struct {
	// StateDir is the state directory whose run store (runs.db) and audit
	// log (audit.db, audit.key) are shown. Both are opened read-only, when
	// first needed: a directory with nothing recorded yet is shown empty
	// until something is.
	StateDir string
	// Runs, when set, is where the runs are read instead (a fleet's):
	// StateDir is then ignored, and the UI has no approvals, clients or
	// audit log of its own (see RunSource).
	Runs RunSource
	// Token is the secret every request must carry (the token query
	// parameter once, then the cookie it sets). At least MinTokenLen
	// bytes; NewToken makes one.
	Token string
	// Addr is the address the server listens on, host:port with a
	// loopback IP (Listen's listener's Addr): the only Host headers served
	// are it and localhost:PORT.
	Addr string
	// Graph, when set, draws a run's capability graph as SVG (package
	// graphview). Its nodes have ids task-<id> and cap-<id>. Nil: no
	// picture, the page shows the lists alone.
	Graph func(ctx context.Context, rec *runstore.Record) ([]byte, error)
	// Logger logs requests refused and store errors; nil logs nothing.
	Logger hclog.Logger
	// PollInterval is how often the stores are looked at while an event
	// stream is open; 0 means 300 ms.
	PollInterval time.Duration
	// MaxClients bounds the open event streams; 0 means 16.
	MaxClients int
}

// MinTokenLen is the shortest token New accepts: 128 bits of base64.
const MinTokenLen = 22

// NewToken returns a random token: 256 bits from crypto/rand, base64url
// without padding (43 characters).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webui: a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Listen listens on addr (host:port) after checking that host is, or
// resolves only to, a loopback address: the UI shows what agents did and
// is never served to the network. It listens on the IP it resolved, not
// the name.
func Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %s: %v", addr, err)
	}
	if host == "" {
		return nil, fmt.Errorf("--addr %s: no host: that is every interface; serve on a loopback address (127.0.0.1:PORT)", addr)
	}
	var ip net.IP
	if ip = net.ParseIP(host); ip == nil {
		ips, err := net.DefaultResolver.LookupIP(context.Background(), "ip", host)
		if err != nil {
			return nil, fmt.Errorf("--addr %s: %v", addr, err)
		}
		for _, x := range ips {
			if !x.IsLoopback() {
				return nil, fmt.Errorf("--addr %s: %s resolves to %s, not a loopback address; the UI serves loopback only", addr, host, x)
			}
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("--addr %s: %s resolves to nothing", addr, host)
		}
		ip = ips[0]
		for _, x := range ips { // prefer IPv4, as browsers resolve localhost
			if x.To4() != nil {
				ip = x
				break
			}
		}
	}
	if !ip.IsLoopback() {
		return nil, fmt.Errorf("--addr %s: %s is not a loopback address; the UI serves loopback only (forward the port with ssh -L to look from elsewhere)", addr, ip)
	}
	return net.Listen("tcp", net.JoinHostPort(ip.String(), port))
}

// Server is the web UI: an http.Handler serving the pages, their assets,
// the JSON they read and the event stream that keeps them live. It writes
// only a person's acts: an approval's answer, a client's reset. Close it to end the event streams and close the stores.
type Server struct {
	o      Options
	logger hclog.Logger
	mux    *http.ServeMux
	guard  *guard
	stores *stores
	live   *hub
	graphs *graphCache
	resets resetNonces // the reset buttons' nonces

	closeOnce sync.Once
	done      chan struct{} // closed by Close: event streams end
}

// New returns a Server for o.
func New(o Options) (*Server, error) {
	if o.StateDir == "" && o.Runs == nil {
		return nil, errors.New("webui: no state directory")
	}
	if o.Runs != nil {
		o.StateDir = ""
	}
	if len(o.Token) < MinTokenLen {
		return nil, fmt.Errorf("webui: a token of %d bytes is too short (at least %d)", len(o.Token), MinTokenLen)
	}
	g, err := newGuard(o.Addr, o.Token)
	if err != nil {
		return nil, err
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 300 * time.Millisecond
	}
	if o.MaxClients <= 0 {
		o.MaxClients = 16
	}
	logger := o.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{o: o, logger: logger, guard: g, done: make(chan struct{})}
	s.stores = newStores(o.StateDir, o.Runs, logger)
	s.live = newHub(s.stores, o.PollInterval, o.MaxClients, logger)
	s.graphs = newGraphCache(o.Graph)
	s.mux = http.NewServeMux()
	s.routes()
	return s, nil
}

// ServeHTTP serves r through the guard (host, method, token, headers).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.guard.serve(w, r, s.mux)
}

// Close ends the event streams and closes the stores.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.live.close()
	})
	return s.stores.close()
}

// Serve serves on ln until ctx is done, then shuts down (event streams
// end at once, other requests get a few seconds) and closes s.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a Serve that failed stops the goroutine below
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		s.closeOnce.Do(func() { close(s.done); s.live.close() })
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	err := srv.Serve(ln)
	cancel()
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	s.Close()
	return err
}
