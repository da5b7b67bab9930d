package natsembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// pollInterval is how often Start and WaitReady look at the server again.
const pollInterval = 25 * time.Millisecond

// Server is a running NATS server. Its methods are safe for concurrent use.
type Server struct {
	ns  *server.Server
	log *logAdapter

	// clustered is whether the server is a member of a cluster, and want
	// how many members must be online for a stream of Replicas
	// min(3, cluster size) to be created; fixed at Start.
	clustered bool
	want      int
}

// Start validates cfg, starts the server and returns once it accepts client
// connections (and routes), or with the error that stopped it. JetStream may
// not be usable yet: call WaitReady.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: %w", err)
	}
	s := &Server{ns: ns, log: newLogAdapter(cfg.Logger), clustered: cfg.Cluster != nil, want: 1}
	if cfg.Cluster != nil {
		s.want = min(3, clusterSize(cfg.Cluster))
	}
	ns.SetLoggerV2(s.log, s.log.log.IsDebug(), s.log.log.IsTrace(), false)
	ns.Start()
	for !ns.ReadyForConnections(pollInterval) {
		err := s.log.failed()
		if err == nil && ctx.Err() != nil {
			err = fmt.Errorf("natsembed: server not accepting connections: %w", ctx.Err())
		}
		if err != nil {
			s.Shutdown()
			return nil, err
		}
	}
	if err := s.log.failed(); err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

// ClientURL is the URL clients connect to, e.g. "nats://127.0.0.1:41234",
// with the port the server listens on.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Name is the server's name: Config.Name or the one it picked.
func (s *Server) Name() string { return s.ns.Name() }

// Shutdown stops the server and waits until it has stopped. Calling it again
// does nothing.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// WaitReady waits until JetStream is usable, or ctx is done. Alone, that is
// once JetStream has started. In a cluster, it is once a meta leader has been
// elected, this server has caught up with it, and enough members are online
// (as this server and, on the leader, as the leader sees them) for a stream
// with Replicas min(3, cluster size) to be created; so it waits for other
// members too.
func (s *Server) WaitReady(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := s.ready()
		if err == nil {
			return nil
		}
		if f := s.log.failed(); f != nil {
			return f
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsembed: %s not ready (%v): %w", s.Name(), err, ctx.Err())
		case <-t.C:
		}
	}
}

// ready returns nil when JetStream is usable, or what it is waiting for.
func (s *Server) ready() error {
	if !s.ns.Running() {
		return errors.New("server stopped")
	}
	if !s.ns.JetStreamEnabled() {
		return errors.New("JetStream not started")
	}
	if !s.clustered {
		return nil
	}
	jsz, err := s.ns.Jsz(nil)
	if err != nil {
		return err
	}
	if jsz.Meta == nil || jsz.Meta.Leader == "" {
		return errors.New("no meta leader")
	}
	if !s.ns.JetStreamIsCurrent() {
		return errors.New("catching up with the meta leader")
	}
	online := 1 // this server; Replicas lists the others
	for _, r := range jsz.Meta.Replicas {
		if !r.Offline {
			online++
		}
	}
	if online < s.want {
		return fmt.Errorf("%d of %d servers online", online, s.want)
	}
	if s.ns.JetStreamIsLeader() {
		if n := len(s.ns.JetStreamClusterPeers()); n < s.want {
			return fmt.Errorf("meta leader sees %d of %d servers", n, s.want)
		}
	}
	return nil
}

// options turns a validated cfg into the server's options.
func (cfg *Config) options() (*server.Options, error) {
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       cfg.host(),
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		// The server only logs through the logger SetLoggerV2 gives it.
		NoLog: false,
	}
	if cl := cfg.Cluster; cl != nil {
		host, port, err := splitHostPort(cl.Listen)
		if err != nil {
			return nil, err
		}
		opts.Cluster = server.ClusterOpts{
			Name:     cl.Name,
			Host:     host,
			Port:     port,
			Username: cl.Username,
			Password: cl.Password,
		}
		for _, p := range cl.Peers {
			u, err := url.Parse(p)
			if err != nil {
				return nil, err
			}
			if cl.Username != "" && u.User == nil {
				u.User = url.UserPassword(cl.Username, cl.Password)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	for _, u := range cfg.Users {
		perms := &server.Permissions{
			Publish:   subjectPermission(u.Publish),
			Subscribe: subjectPermission(u.Subscribe),
		}
		if u.AllowResponses {
			perms.Response = &server.ResponsePermission{
				MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
				Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION,
			}
		}
		opts.Users = append(opts.Users, &server.User{
			Username:    u.Name,
			Password:    u.Password,
			Permissions: perms,
		})
	}
	return opts, nil
}

// subjectPermission allows exactly subjects. The server reads an empty allow
// list as "allow all", so none is a deny of everything.
func subjectPermission(subjects []string) *server.SubjectPermission {
	if len(subjects) == 0 {
		return &server.SubjectPermission{Deny: []string{">"}}
	}
	return &server.SubjectPermission{Allow: append([]string(nil), subjects...)}
}

// clusterSize counts this server and its distinct peers, leaving out a peer
// that is this server's own route.
func clusterSize(cl *ClusterConfig) int {
	self := strings.ToLower(cl.Listen)
	seen := map[string]bool{self: true}
	for _, p := range cl.Peers {
		u, err := url.Parse(p)
		if err != nil {
			continue
		}
		seen[strings.ToLower(net.JoinHostPort(u.Hostname(), u.Port()))] = true
	}
	return len(seen)
}
