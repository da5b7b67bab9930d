// Package fleet runs Mandate on many machines over NATS JetStream: a run is
// submitted to a work queue, one node takes it and owns it (its kernel,
// capability tree, budgets and records), and the submitter learns its
// outcome. No other coordination service is used. It is what "mandate node"
// and "mandate run --nats" run on, and the API for a Go program that
// submits runs to a fleet or is a node of one:
//
//	nc, f, err := fleet.Connect(ctx, "nats://127.0.0.1:4222", 1)
//	s, modules, err := fleet.Bundle(ctx, "examples/benefits/alice.hcl", nil, nil, build)
//	err = f.Submit(ctx, s, modules)
//	st, err := f.Wait(ctx, s.ID, fleet.DefaultLease) // st.State, st.Result, st.Node, st.RunID
//
// and a node is a Node{Name, Fleet, Host, WorkDir} whose Run takes runs
// until its context ends (internal/cli/node.go is one). Children placed on
// other nodes (place.go) and retried runs (a manifest's retry) are
// described in docs/fleet.md.
//
// # Streams and buckets
//
//	MANDATE_RUNS       work-queue stream, subject mandate.runs.submit: the
//	                   submissions; each is delivered to one node
//	MANDATE_MODULES    object store: WebAssembly modules by digest
//	                   ("sha256:<hex>"), checked against it on arrival
//	MANDATE_RUN_STATE  key-value: a submission's state by its id (queued,
//	                   running on a node, done, refused, lost)
//	MANDATE_NODES      key-value: each node's heartbeat
//	MANDATE_AUDIT      every node's audit log, copied (see VerifyAudit)
//
// Ensure creates them (replicated Replicas times, 3 in a cluster).
//
// # At most once
//
// A node claims a submission by changing its state from queued to running
// with a compare-and-set on the key's revision, and acknowledges the
// message only then (a run whose manifest sets retry, every capability
// repeatable, is acknowledged only when it ends, and queued again when its
// node is lost): a submission redelivered after a node died before
// acknowledging finds its state running and is acknowledged unrun. So a
// run is started at most once, by the node whose claim won, never re-run
// behind the person's back.
//
// # Leases
//
// A claim is held under the node's lease (lease.go): each heartbeat that
// gets through renews it for LostAfter, every effect of the run asks it
// first, and the node kills its runs when it lapses. Others declare the
// run lost (by the same compare-and-set) only after the lease and a margin
// have passed by their own clock since they last saw the node's
// heartbeat, confirmed by a read from the bucket's leader; so no effect of
// a run follows its lost mark. The claim's fencing token (the revision it
// replaced) guards every later write of the node: never over another
// attempt, never over a final state. docs/fleet.md states the timing
// assumptions.
//
// # What travels
//
// A submission carries the manifest's text, its variables and input, the
// root task's module by digest (built by the submitter when the manifest
// names a guest folder, "." included), and the files the manifest names
// relative to its folder: seed files inline, spawn modules by digest.
// Modules travel through MANDATE_MODULES. The node recreates the folder
// (a spawn module's bytes at the path that named it), parses the manifest
// there and runs the root module's bytes. What a manifest reads from the
// environment (credentials: a net header's env, a pay instrument's env) is
// read on the node: secrets
// live with the nodes that use them, never in a submission.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names of the streams and buckets, and the submission subject.
const (
	StreamRuns    = "MANDATE_RUNS"
	SubjectSubmit = "mandate.runs.submit"
	BucketModules = "MANDATE_MODULES"
	BucketRuns    = "MANDATE_RUN_STATE"
	BucketNodes   = "MANDATE_NODES"
	consumerName  = "nodes"
)

// DefaultLease is a node's lease (its LostAfter) unless it says otherwise.
// It must outlast a NATS cluster's leader election, during which no
// heartbeat gets through: a stream elects a new leader 4–9 s after its
// leader's server dies (the raft election timeout), and on this project's
// loaded two-core machine heartbeats stopped for up to 7.5 s while a
// killed server's streams elected (internal/faults); 30 s leaves room for
// a slower machine, a second election, or a wall clock stepped on it. A
// node publishes its own with its heartbeats.
const DefaultLease = 30 * time.Second

// Run states.
const (
	StateQueued  = "queued"
	StateRunning = "running"
	StateDone    = "done"
	StateRefused = "refused" // the node could not start it: nothing ran
	StateLost    = "lost"    // its node died while it ran
)

// Submission is one run as it travels to a node.
type Submission struct {
	ID       string            `json:"id"`
	Manifest string            `json:"manifest"` // the manifest's file name
	Source   []byte            `json:"source"`   // its text
	Vars     map[string]string `json:"vars,omitempty"`
	Input    []byte            `json:"input,omitempty"`
	Files    map[string]File   `json:"files,omitempty"` // by slash path relative to the manifest
	// Module is the root task's module, by digest: what the node runs,
	// whatever the manifest's module names (a guest folder, "." for a
	// tool's own folder, a .wasm file).
	Module string    `json:"module"`
	Time   time.Time `json:"time"`
	// Retry is the manifest's retry: how many more attempts a lost run
	// gets (0: none). A node checks it against the manifest it parses.
	Retry int `json:"retry,omitempty"`
	// Receipt asks the node for the run's signed receipt (mandate run
	// --receipt), returned in the run's state.
	Receipt bool `json:"receipt,omitempty"`
}

// File is a file a manifest names: a module by digest, or data inline.
type File struct {
	Module string `json:"module,omitempty"`
	Data   []byte `json:"data,omitempty"`
}

// RunState is a submission's state in MANDATE_RUN_STATE.
type RunState struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Node owns the run from its claim on; RunID is the run's id in that
	// node's run store and audit log.
	Node  string `json:"node,omitempty"`
	RunID string `json:"run_id,omitempty"`
	// Exit, Result and ResultLabel are the outcome of a done run.
	Exit        int             `json:"exit"`
	Result      []byte          `json:"result,omitempty"`
	HasResult   bool            `json:"has_result,omitempty"`
	ResultLabel json.RawMessage `json:"result_label,omitempty"`
	// Error says why a run was refused, lost or failed.
	Error string `json:"error,omitempty"`
	// Retry is the submission's; Attempt counts the claims (1 for the
	// first run, 2 for the first retry...). Lost lists the attempts whose
	// node was lost ("node-a (run 2f1c...)").
	Retry   int      `json:"retry,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Lost    []string `json:"lost,omitempty"`
	// Incarnation is the process of Node that claimed the run (its
	// heartbeats name it); Token is the claim's fencing token: the
	// revision of the queued state the claim replaced. Every later write
	// of the run's node requires the state to carry both.
	Incarnation string `json:"incarnation,omitempty"`
	Token       uint64 `json:"token,omitempty"`
	// After is what the node of a run marked lost said of the run's end
	// once it could (the state stays lost: the first final state is the
	// one that counts), e.g. "killed: this node's lease ... expired".
	After string `json:"after,omitempty"`
	// Receipt is the run's receipt signed with its node's audit key,
	// when the submission asked for one. Check it against the key the
	// node's audit copy carries (Fleet.NodeKey), not one a state names.
	Receipt   []byte    `json:"receipt,omitempty"`
	Submitted time.Time `json:"submitted"`
	Started   time.Time `json:"started,omitempty"`
	Ended     time.Time `json:"ended,omitempty"`
}

// Final reports whether s is an end state.
func (s RunState) Final() bool {
	return s.State == StateDone || s.State == StateRefused || s.State == StateLost
}

// Heartbeat is a node's entry in MANDATE_NODES.
type Heartbeat struct {
	Node    string    `json:"node"`
	Time    time.Time `json:"time"`
	Running int       `json:"running"`
	// Incarnation names the node's process (drawn at its start): the
	// runs an earlier process claimed are not this one's.
	Incarnation string `json:"incarnation,omitempty"`
	// Lease is how long each heartbeat renews the node's lease on its
	// runs (its LostAfter): what others judge its silence by.
	Lease time.Duration `json:"lease,omitempty"`
}

// Fleet is the streams and buckets on one JetStream connection.
type Fleet struct {
	JS      jetstream.JetStream
	Runs    jetstream.Stream
	Audit   jetstream.Stream
	Modules jetstream.ObjectStore
	States  jetstream.KeyValue
	Nodes   jetstream.KeyValue
}

// Ensure finds the fleet's streams and buckets, creating those missing
// with replicas copies. What exists is never changed: a node started with
// the default of one replica does not shrink a cluster's three.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) (*Fleet, error) {
	if replicas < 1 {
		replicas = 1
	}
	f := &Fleet{JS: js}
	stream := func(cfg jetstream.StreamConfig) (jetstream.Stream, error) {
		s, err := js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				s, err = js.Stream(ctx, cfg.Name)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("fleet: stream %s: %w", cfg.Name, err)
		}
		return s, nil
	}
	kv := func(cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
		b, err := js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			b, err = js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jetstream.ErrBucketExists) {
				b, err = js.KeyValue(ctx, cfg.Bucket)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("fleet: bucket %s: %w", cfg.Bucket, err)
		}
		return b, nil
	}
	var err error
	if f.Runs, err = stream(jetstream.StreamConfig{
		Name: StreamRuns, Subjects: []string{SubjectSubmit}, Retention: jetstream.WorkQueuePolicy,
		Replicas: replicas, Duplicates: 10 * time.Minute, MaxMsgSize: 64 << 20,
	}); err != nil {
		return nil, err
	}
	if f.Audit, err = stream(jetstream.StreamConfig{
		Name: StreamAudit, Subjects: []string{subjectAudit + ">"}, Replicas: replicas,
		Duplicates: 10 * time.Minute, Description: "Mandate nodes' audit logs, copied",
	}); err != nil {
		return nil, err
	}
	f.Modules, err = js.ObjectStore(ctx, BucketModules)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		f.Modules, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: BucketModules, Replicas: replicas, Description: "Mandate modules by digest"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			f.Modules, err = js.ObjectStore(ctx, BucketModules)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: object store %s: %w", BucketModules, err)
	}
	if f.States, err = kv(jetstream.KeyValueConfig{
		Bucket: BucketRuns, Replicas: replicas, History: 8, Description: "Mandate run states",
	}); err != nil {
		return nil, err
	}
	if f.Nodes, err = kv(jetstream.KeyValueConfig{
		Bucket: BucketNodes, Replicas: replicas, Description: "Mandate node heartbeats",
	}); err != nil {
		return nil, err
	}
	return f, nil
}

// newID is a submission's id: 128 random bits, hex (a valid KV key).
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// opTimeout bounds one read or write of a run's state: a request whose
// reply was lost (core NATS delivers at most once) fails after it, and the
// caller tries again, rather than waiting out the caller's whole context.
const opTimeout = 10 * time.Second

// State reads a submission's state and its revision from the bucket's
// leader (a read no replica behind can answer: a claim, a lost mark and
// a dropped submission are decided on it). A submission with no state is
// jetstream.ErrKeyNotFound.
func (f *Fleet) State(ctx context.Context, id string) (RunState, uint64, error) {
	data, rev, err := lastFor(ctx, f.JS.Conn(), "KV_"+BucketRuns, "$KV."+BucketRuns+"."+id)
	if err != nil {
		return RunState{}, 0, err
	}
	var s RunState
	if err := json.Unmarshal(data, &s); err != nil {
		return RunState{}, 0, fmt.Errorf("fleet: the state of %s: %w", id, err)
	}
	return s, rev, nil
}

// swap writes s over the revision rev of its key; ok is false when the key
// moved on since (another node's claim, a lost mark).
func (f *Fleet) swap(ctx context.Context, s RunState, rev uint64) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	b, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	if _, err := f.States.Update(ctx, s.ID, b, rev); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return false, nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// AllStates lists every submission's state (for mandate runs --nats),
// read in one pass over the bucket.
func (f *Fleet) AllStates(ctx context.Context) ([]RunState, error) {
	w, err := f.States.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []RunState
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("fleet: the states' watch ended")
			}
			if e == nil {
				return out, nil // all delivered
			}
			var s RunState
			if json.Unmarshal(e.Value(), &s) == nil {
				out = append(out, s)
			}
		}
	}
}

// Connect connects to the NATS servers urls (comma-separated; credentials
// in the URLs), reconnecting for ever, and finds or creates the fleet's
// streams and buckets (Ensure, with replicas copies). A cluster electing a
// leader answers nothing for seconds: Ensure is tried again until it
// succeeds or ctx ends (a refused permission ends it at once). The caller
// closes the connection.
func Connect(ctx context.Context, urls string, replicas int, opts ...nats.Option) (*nats.Conn, *Fleet, error) {
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to NATS at %s: %w", RedactURLs(urls), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	wait := 250 * time.Millisecond
	for {
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		f, err := Ensure(ectx, js, replicas)
		cancel()
		if err == nil {
			return nc, f, nil
		}
		if ctx.Err() != nil || errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, nats.ErrAuthorization) {
			nc.Close()
			return nil, nil, err
		}
		select {
		case <-ctx.Done():
			nc.Close()
			return nil, nil, fmt.Errorf("%w (waited for the cluster until %v)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// RedactURLs hides the passwords of NATS URLs (for logs and errors).
func RedactURLs(urls string) string {
	var out []string
	for _, u := range strings.Split(urls, ",") {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if i := strings.Index(u, "://"); i >= 0 && i < at {
				cred := u[i+3 : at]
				if c := strings.Index(cred, ":"); c >= 0 {
					u = u[:i+3] + cred[:c] + ":***" + u[at:]
				}
			}
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}
