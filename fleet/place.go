package fleet

// Children on other nodes. A run's owner places a child whose spawn
// capability says placement = "fleet" (or "node:NAME") on another node: the
// child's guest runs there and every host call it makes comes back to the
// owner's kernel (package sandbox/forward), so the owner mediates it, audits
// it and may revoke what the child holds between two of its calls.
//
// Subjects (core NATS, not JetStream; nothing here is stored):
//
//	mandate.exec.<node>                   a request to run a child (JSON, execRequest)
//	mandate.fwd.<owner>.<node>.<nonce>    the child's node to the owner: accepted, calls, exit
//	mandate.ret.<node>.<owner>.<nonce>    the owner to the child's node: replies, kill
//
// NodePermissions lets a node publish fwd only with its own name as the
// child's node and ret only with its own name as the owner, so a call on
// the owner's subject can only have come from the node the owner placed the
// child on, and a reply only from the owner. The nonce (128 random bits)
// names one child's run.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/forward"
	"github.com/nats-io/nats.go"
)

const (
	subjectExec = "mandate.exec."
	subjectFwd  = "mandate.fwd."
	subjectRet  = "mandate.ret."
)

// Message tags beyond forward's own: the child's node accepted or refused
// the run; the owner kills it.
const (
	tagAccept = 'A'
	tagKill   = 'K'
	tagAck    = 'E' // the owner has the exit
)

// resend is how long a message of a placed child waits for its answer
// before it is sent again: core NATS delivers at most once, and a server
// stopping loses what it held. A call sent again is answered with the
// reply already sent, never run twice.
var resend = time.Second

// execRequest asks a node to run a child's guest.
type execRequest struct {
	Owner       string        `json:"owner"`
	Nonce       string        `json:"nonce"`
	Run         string        `json:"run"` // the submission, for logs
	Module      string        `json:"module"`
	Name        string        `json:"name"`
	Entry       string        `json:"entry,omitempty"`
	MemoryLimit uint64        `json:"memory_limit"`
	Timeout     time.Duration `json:"timeout"`
	// The child's static limits and compile memory (its run's root's,
	// which a child inherits): the child's node compiles and checks the
	// module under them, and under Timeout (kernel.Limits.CompileLimits).
	StaticLimits  sandbox.StaticLimits `json:"static_limits"`
	CompileMemory uint64               `json:"compile_memory,omitempty"`
}

// compileConfig is what the child's module is compiled under.
func (r *execRequest) compileConfig() sandbox.CompileConfig {
	return kernel.Limits{Timeout: r.Timeout, Functions: r.StaticLimits.Functions, Locals: r.StaticLimits.Locals,
		Nesting: r.StaticLimits.Nesting, BrTableTargets: r.StaticLimits.BrTableTargets,
		FunctionSize: r.StaticLimits.BodySize, CompileMemory: r.CompileMemory}.CompileLimits()
}

// accept is the child's node's answer.
type accept struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// placer is a kernel.Placer for one run owned by n.
type placer struct {
	n   *Node
	run string
	// compile is the run's root's CompileConfig (its Timeout aside: each
	// child's is its own), which its children's modules are compiled
	// under on the nodes they are placed on.
	compile sandbox.CompileConfig
}

// Place implements kernel.Placer: it picks the node (the named one, or the
// live node other than this one running the fewest tasks) and returns the
// module that runs the child there.
func (p *placer) Place(ctx context.Context, placement string, mod sandbox.Module, hostFuncs []sandbox.HostFunc) (sandbox.Module, error) {
	target, err := p.n.pick(ctx, placement)
	if err != nil {
		return nil, err
	}
	start := func(ctx context.Context, mod sandbox.Module, cfg sandbox.RunConfig) (forward.Conn, error) {
		return p.n.startRemote(ctx, target, p.run, mod, cfg, p.compile)
	}
	return forward.NewModule(mod, hostFuncs, start), nil
}

// pick chooses the node a child runs on.
func (n *Node) pick(ctx context.Context, placement string) (target, error) {
	live, err := n.liveNodes(ctx)
	if err != nil {
		return target{}, err
	}
	if name, ok := strings.CutPrefix(placement, "node:"); ok {
		hb, ok := live[name]
		if !ok && n.live.Load().refresh(ctx, name) == nil {
			hb, ok = n.live.Load().live()[name]
		}
		if !ok {
			return target{}, fmt.Errorf("node %s is not in the fleet (no heartbeat within its lease)", name)
		}
		return target{name, hb.Incarnation}, nil
	}
	if placement != "fleet" {
		return target{}, fmt.Errorf("placement %q is not understood here", placement)
	}
	if len(live) < 2 { // the watch may lag: ask the leader
		l := n.live.Load()
		for _, name := range l.known() {
			l.refresh(ctx, name)
		}
		live = l.live()
	}
	best, least := "", -1
	for name, hb := range live {
		if name == n.Name {
			continue
		}
		if least < 0 || hb.Running < least || hb.Running == least && name < best {
			best, least = name, hb.Running
		}
	}
	if best == "" {
		return target{}, errors.New("no other node of the fleet is alive")
	}
	return target{best, live[best].Incarnation}, nil
}

// target is a node a child is placed on, in the incarnation it had.
type target struct{ name, inc string }

// liveNodes lists the nodes whose heartbeat was seen within their lease.
func (n *Node) liveNodes(ctx context.Context) (map[string]Heartbeat, error) {
	live := n.live.Load()
	if live == nil {
		return nil, errors.New("this node is not running")
	}
	if err := live.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("reading the fleet's nodes: %w", err)
	}
	return live.live(), nil
}

func newNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startRemote asks target to run mod's guest and returns the owner's side
// of the run.
func (n *Node) startRemote(ctx context.Context, to target, run string, mod sandbox.Module, cfg sandbox.RunConfig, compile sandbox.CompileConfig) (forward.Conn, error) {
	nc := n.Fleet.JS.Conn()
	target := to.name
	req := execRequest{Owner: n.Name, Nonce: newNonce(), Run: run, Module: mod.Digest(), Name: cfg.Name,
		Entry: cfg.Entry, MemoryLimit: cfg.MemoryLimit, Timeout: cfg.Timeout,
		StaticLimits: compile.Limits, CompileMemory: compile.MemoryLimit}
	c := &remoteConn{n: n, target: target, inc: to.inc, ret: subjectRet + target + "." + n.Name + "." + req.Nonce,
		msgs: make(chan *nats.Msg, 4)}
	sub, err := nc.ChanSubscribe(subjectFwd+n.Name+"."+target+"."+req.Nonce, c.msgs)
	if err != nil {
		return nil, err
	}
	c.sub = sub
	b, _ := json.Marshal(req)
	if err := nc.Publish(subjectExec+target, b); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	// The child's node says whether it took the run; the request is sent
	// again until it does (the node answers a nonce it knows again).
	// It may first fetch and compile the module (a cold node under
	// load: a minute or more), or be reconnecting to another NATS
	// server, so the wait is long: up to 3 minutes, within the parent's
	// own time (ctx). The child's timeout counts from its start on the
	// node, not from here: a 20 s child placed while a NATS server
	// restarted under load was refused unstarted (TestFleetCluster).
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	tick := time.NewTicker(resend)
	defer tick.Stop()
wait:
	select {
	case <-tick.C:
		nc.Publish(subjectExec+target, b)
		goto wait
	case m := <-c.msgs:
		var a accept
		if len(m.Data) == 0 || m.Data[0] != tagAccept || json.Unmarshal(m.Data[1:], &a) != nil {
			sub.Unsubscribe()
			return nil, fmt.Errorf("node %s: not an answer to a placement", target)
		}
		if !a.OK {
			sub.Unsubscribe()
			return nil, fmt.Errorf("node %s refused the child: %s", target, a.Error)
		}
	case <-actx.Done():
		sub.Unsubscribe()
		return nil, fmt.Errorf("node %s did not answer the placement: %w", target, actx.Err())
	}
	n.Logger.Info("child placed", "submission", run, "node", target, "module", mod.Digest())
	return c, nil
}

// remoteConn is the owner's side of a child on another node.
type remoteConn struct {
	n      *Node
	target string
	inc    string // the target's incarnation when the child was placed
	ret    string
	sub    *nats.Subscription
	msgs   chan *nats.Msg
	seq    uint64
	last   []byte // the reply to call seq, sent again if the call comes again
}

// Next implements forward.Conn. The child's node is watched: when its
// heartbeat is older than LostAfter the run ends (fail closed), and a
// message out of order ends it too.
func (c *remoteConn) Next(ctx context.Context) (*forward.Call, *forward.Exit, error) {
	t := time.NewTicker(c.n.Heartbeat)
	defer t.Stop()
	for {
		select {
		case m := <-c.msgs:
			if len(m.Data) > 0 && m.Data[0] == tagAccept {
				continue // an answer to a placement sent again
			}
			call, _, exit, err := forward.Unmarshal(m.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("node %s: %w", c.target, err)
			}
			if exit != nil {
				c.n.Fleet.JS.Conn().Publish(c.ret, []byte{tagAck})
				return nil, exit, nil
			}
			if call != nil && call.Seq == c.seq && c.last != nil {
				c.n.Fleet.JS.Conn().Publish(c.ret, c.last) // its reply was lost
				continue
			}
			if call == nil || call.Seq != c.seq+1 {
				return nil, nil, fmt.Errorf("node %s: a message out of order", c.target)
			}
			c.seq = call.Seq
			return call, nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-t.C:
			if dead, why := c.n.live.Load().dead(ctx, c.target, c.inc); dead {
				err := fmt.Errorf("node %s, where this child ran, is lost (%s): its calls are refused and nothing more of it runs here", c.target, why)
				if aerr := kernel.RecordElsewhere(ctx, "forward", err); aerr != nil {
					c.n.Logger.Error("auditing a lost child's node", "error", aerr)
				}
				c.Kill()
				return nil, nil, err
			}
		}
	}
}

// Reply implements forward.Conn.
func (c *remoteConn) Reply(_ context.Context, r *forward.Reply) error {
	c.last = forward.MarshalReply(r)
	return c.n.Fleet.JS.Conn().Publish(c.ret, c.last)
}

// Kill implements forward.Conn.
func (c *remoteConn) Kill() { c.n.Fleet.JS.Conn().Publish(c.ret, []byte{tagKill}) }

// Close implements forward.Conn.
func (c *remoteConn) Close() { c.sub.Unsubscribe() }

// childHost runs the guests of children other nodes place on this one.
type childHost struct {
	n   *Node
	eng sandbox.Engine
	sem chan struct{}

	mu      sync.Mutex
	mods    map[string]sandbox.Module
	answers map[string][]byte // by nonce: the answer to a placement, nil while it is made
}

// serveChildren takes placements until ctx ends.
func (n *Node) serveChildren(ctx context.Context) (stop func(), err error) {
	opts := n.Host.Options()
	eng, err := host.NewEngine(ctx, opts.Engine, opts.CacheDir+"/"+opts.Engine)
	if err != nil {
		return nil, err
	}
	if err := eng.Host(abi.ModuleName, forward.Stubs(kernel.HostCallFuncs())); err != nil {
		eng.Close(ctx)
		return nil, err
	}
	h := &childHost{n: n, eng: eng, sem: make(chan struct{}, n.Children), mods: map[string]sandbox.Module{}, answers: map[string][]byte{}}
	var wg sync.WaitGroup
	sub, err := n.Fleet.JS.Conn().Subscribe(subjectExec+n.Name, func(m *nats.Msg) {
		var req execRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || !validName(req.Owner) || !validNonce(req.Nonce) {
			n.Logger.Warn("a placement that does not decode: dropped", "error", err)
			return
		}
		h.mu.Lock()
		ans, seen := h.answers[req.Nonce]
		if !seen {
			h.answers[req.Nonce] = nil
		}
		h.mu.Unlock()
		if seen { // the owner sent it again: its answer was lost
			if ans != nil {
				n.Fleet.JS.Conn().Publish(subjectFwd+req.Owner+"."+n.Name+"."+req.Nonce, ans)
			}
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.run(ctx, req)
			time.AfterFunc(time.Minute, func() {
				h.mu.Lock()
				delete(h.answers, req.Nonce)
				h.mu.Unlock()
			})
		}()
	})
	if err != nil {
		eng.Close(ctx)
		return nil, err
	}
	return func() {
		sub.Unsubscribe()
		wg.Wait()
		eng.Close(context.Background())
	}, nil
}

// validNonce: what newNonce draws, 32 lower-case hex digits. It is spliced
// into subjects, so anything else (a "*" or ">") could make this node
// subscribe to other children's answers.
func validNonce(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// validName: a node name as a subject token.
func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// run runs one placed child's guest, its calls going to the owner.
func (h *childHost) run(ctx context.Context, req execRequest) {
	n := h.n
	nc := n.Fleet.JS.Conn()
	fwd := subjectFwd + req.Owner + "." + n.Name + "." + req.Nonce
	answer := func(a accept) {
		b, _ := json.Marshal(a)
		b = append([]byte{tagAccept}, b...)
		h.mu.Lock()
		h.answers[req.Nonce] = b
		h.mu.Unlock()
		nc.Publish(fwd, b)
	}
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	default:
		answer(accept{Error: fmt.Sprintf("node %s runs %d children already", n.Name, cap(h.sem))})
		return
	}
	if n.fenced.Load() {
		answer(accept{Error: "node " + n.Name + " is cut off from the fleet"})
		return
	}
	mod, err := h.module(ctx, req.Module, req.compileConfig())
	if err != nil {
		answer(accept{Error: err.Error()})
		return
	}
	// Replies and the kill come on ret.
	s := &natsSender{nc: nc, fwd: fwd, replies: make(chan []byte, 1)}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	acked := make(chan struct{})
	var ackOnce sync.Once
	sub, err := nc.Subscribe(subjectRet+n.Name+"."+req.Owner+"."+req.Nonce, func(m *nats.Msg) {
		if len(m.Data) == 1 && m.Data[0] == tagKill {
			cancel()
			return
		}
		if len(m.Data) == 1 && m.Data[0] == tagAck {
			ackOnce.Do(func() { close(acked) })
			return
		}
		select {
		case s.replies <- m.Data:
		default: // no call is waiting: not ours to keep
		}
	})
	if err != nil {
		answer(accept{Error: err.Error()})
		return
	}
	defer sub.Unsubscribe()
	n.mu.Lock()
	n.cancels["child:"+req.Nonce] = cancel // killed with this node's runs if it is cut off
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.cancels, "child:"+req.Nonce)
		n.mu.Unlock()
	}()
	answer(accept{OK: true})
	n.placedChildren.Add(1)
	n.running.Add(1)
	defer n.running.Add(-1)
	var out, errOut forward.Output
	cfg := sandbox.RunConfig{Name: req.Name, Entry: req.Entry, MemoryLimit: req.MemoryLimit, Timeout: req.Timeout,
		Stdout: &out, Stderr: &errOut}
	if req.Timeout > 0 {
		var c2 context.CancelFunc
		gctx, c2 = context.WithTimeout(gctx, req.Timeout+forward.KillGrace)
		defer c2()
	}
	err = mod.Run(forward.WithSender(gctx, s, int(nc.MaxPayload())), cfg)
	if ferr := forward.Failed(gctx); ferr != nil && err == nil {
		err = fmt.Errorf("a call could not reach the owner: %w", ferr)
	}
	n.Logger.Info("placed child ended", "owner", req.Owner, "submission", req.Run, "error", err)
	exit := forward.MarshalExit(forward.ExitOf(err, out.Bytes(), errOut.Bytes()))
	for try := 0; try < 10; try++ {
		nc.Publish(fwd, exit)
		select {
		case <-acked:
			return
		case <-time.After(resend):
		}
	}
	n.Logger.Warn("the owner never acknowledged a placed child's end", "owner", req.Owner, "submission", req.Run)
}

// module compiles (once) the module of digest d on the child engine,
// under cfg; a module compiled before is checked against cfg's static
// limits all the same (the engine's CompileWith on bytes it has compiled
// returns the module it has).
func (h *childHost) module(ctx context.Context, d string, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	b, err := h.n.module(ctx, d)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	m, ok := h.mods[d]
	h.mu.Unlock()
	if ok {
		again, err := h.eng.CompileWith(ctx, b, cfg)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", d, err)
		}
		again.Close(context.Background()) // the same module, held by h.mods
		return m, nil
	}
	m, err = h.eng.CompileWith(ctx, b, cfg)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", d, err)
	}
	h.mu.Lock()
	h.mods[d] = m
	h.mu.Unlock()
	return m, nil
}

// natsSender sends a child's calls to its owner and waits for each reply.
type natsSender struct {
	nc      *nats.Conn
	fwd     string
	replies chan []byte
}

// Send implements forward.Sender. It waits for the reply as long as the
// child's run lasts: a call may wait for a person's approval.
func (s *natsSender) Send(ctx context.Context, c *forward.Call) (*forward.Reply, error) {
	b := forward.MarshalCall(c)
	if err := s.nc.Publish(s.fwd, b); err != nil {
		return nil, err
	}
	t := time.NewTicker(resend)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			// Sent again: the owner answers a call it has served with
			// the reply it sent, so nothing runs twice.
			if err := s.nc.Publish(s.fwd, b); err != nil {
				return nil, err
			}
		case b := <-s.replies:
			_, r, _, err := forward.Unmarshal(b)
			if err != nil || r == nil {
				return nil, fmt.Errorf("the owner's reply: %v", err)
			}
			if r.Seq != c.Seq {
				continue // a late reply to an earlier call
			}
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
