package natsembed

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// DefaultHost is the host the server listens on when Config.Host is empty.
const DefaultHost = "127.0.0.1"

// Config says how to run one server. The zero value is not usable: StoreDir
// is required.
type Config struct {
	// Name is the server's name. In a cluster it is required, unique among
	// the servers and the same across restarts: JetStream knows its peers by
	// it. Alone, the server picks one when it is empty.
	Name string

	// StoreDir is the directory JetStream keeps its streams in. Required.
	StoreDir string

	// Host is the address clients connect to; DefaultHost when empty. It
	// must be a loopback address (or "localhost") unless AllowNonLoopback.
	Host string

	// Port is the client port; 0 picks a free one (see Server.ClientURL).
	Port int

	// AllowNonLoopback lets Host and Cluster.Listen be any address. Without
	// Users, anyone who reaches such an address may do anything.
	AllowNonLoopback bool

	// Cluster makes the server a member of a cluster; nil runs it alone.
	Cluster *ClusterConfig

	// Users, when not empty, are the only clients the server accepts.
	Users []User

	// Logger receives the server's log lines; nil discards them.
	Logger hclog.Logger
}

// ClusterConfig makes a server a member of a cluster.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every member. Required.
	Name string

	// Listen is the host:port this server accepts routes from the others
	// on, e.g. "127.0.0.1:6222". Required, loopback unless
	// Config.AllowNonLoopback. The port must be fixed: the others dial it.
	Listen string

	// Peers are the other members' route URLs, e.g. "nats://127.0.0.1:6223".
	// Listing this server's own route as well is harmless. A member with no
	// peers waits for the others to dial it.
	Peers []string

	// Username and Password, when set, are required of every route, and
	// sent on the routes this server dials: every member must have the same.
	// Without them any process that reaches Listen can join the cluster.
	Username string
	Password string
}

// User is a client the server accepts.
type User struct {
	// Name and Password authenticate the client. Both required.
	Name     string
	Password string

	// Publish and Subscribe are the subjects the user may publish to and
	// subscribe to (wildcards allowed); empty allows none. JetStreamUser
	// adds the ones JetStream needs.
	Publish   []string
	Subscribe []string

	// AllowResponses lets the user publish one reply, within two minutes, to
	// the reply subject of each request it received, whatever Publish says.
	AllowResponses bool
}

// validate checks c once, before any server is made.
func (c *Config) validate() error {
	if c.StoreDir == "" {
		return errors.New("natsembed: Config.StoreDir is required")
	}
	if err := c.checkHost("Config.Host", c.host()); err != nil {
		return err
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("natsembed: Config.Port %d is not a port", c.Port)
	}
	if cl := c.Cluster; cl != nil {
		if c.Name == "" {
			return errors.New("natsembed: Config.Name is required in a cluster")
		}
		if cl.Name == "" {
			return errors.New("natsembed: Cluster.Name is required")
		}
		host, port, err := splitHostPort(cl.Listen)
		if err != nil {
			return fmt.Errorf("natsembed: Cluster.Listen %q: %w", cl.Listen, err)
		}
		if port == 0 {
			return fmt.Errorf("natsembed: Cluster.Listen %q needs a fixed port", cl.Listen)
		}
		if err := c.checkHost("Cluster.Listen", host); err != nil {
			return err
		}
		for _, p := range cl.Peers {
			u, err := url.Parse(p)
			if err != nil || u.Scheme != "nats" || u.Port() == "" {
				return fmt.Errorf("natsembed: Cluster.Peers: %q is not nats://host:port", p)
			}
		}
		if (cl.Username == "") != (cl.Password == "") {
			return errors.New("natsembed: Cluster.Username and Cluster.Password go together")
		}
	}
	seen := make(map[string]bool, len(c.Users))
	for _, u := range c.Users {
		if u.Name == "" || u.Password == "" {
			return fmt.Errorf("natsembed: user %q needs a name and a password", u.Name)
		}
		if seen[u.Name] {
			return fmt.Errorf("natsembed: user %q given twice", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}

func (c *Config) host() string {
	if c.Host == "" {
		return DefaultHost
	}
	return c.Host
}

// checkHost refuses a host that is not loopback unless c allows it.
func (c *Config) checkHost(field, host string) error {
	if c.AllowNonLoopback || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("natsembed: %s %q is not a loopback address (set AllowNonLoopback to listen on it)", field, host)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func splitHostPort(hostport string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return host, port, nil
}
