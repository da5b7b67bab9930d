package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The fleet's records: each node keeps its own Merkle audit log, signed
// with its own key, and copies it to MANDATE_AUDIT:
//
//	mandate.audit.<node>.key         its verifier key
//	mandate.audit.<node>.entry       each entry, in order (message id <node>/<seq>)
//	mandate.audit.<node>.checkpoint  its signed checkpoints
//
// VerifyAudit reads the stream: every node's copy must verify against its
// latest signed checkpoint.
const (
	StreamAudit   = "MANDATE_AUDIT"
	subjectAudit  = "mandate.audit."
	auditMaxBatch = 512
)

// auditCopier copies one node's audit log to the stream.
type auditCopier struct {
	node string
	log  *audit.Log
	js   jetstream.JetStream
	s    jetstream.Stream
	next int64 // the next seq to copy; -1 until read from the stream
}

// copyNew copies what the stream lacks of the log: its key, the entries
// up to a new checkpoint, then that checkpoint.
func (a *auditCopier) copyNew(ctx context.Context) error {
	if a.next < 0 {
		if _, err := a.js.Publish(ctx, subjectAudit+a.node+".key", []byte(a.log.VerifierKey()),
			jetstream.WithMsgID(a.node+"/key/"+a.log.VerifierKey())); err != nil {
			return err
		}
		a.next = 0
		m, err := a.s.GetLastMsgForSubject(ctx, subjectAudit+a.node+".entry")
		if err == nil {
			var e audit.Entry
			if json.Unmarshal(m.Data, &e) == nil {
				a.next = e.Seq + 1
			}
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
	}
	signed, err := a.log.Checkpoint()
	if err != nil {
		return err
	}
	c, err := audit.OpenCheckpoint(signed, a.log.VerifierKey())
	if err != nil {
		return err
	}
	for a.next < c.Size {
		es, err := a.log.Entries(ctx, audit.Filter{From: a.next, Before: min(c.Size, a.next+auditMaxBatch)})
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return fmt.Errorf("fleet: the audit log has no entry %d", a.next)
		}
		for _, e := range es {
			b, _ := json.Marshal(e)
			if _, err := a.js.Publish(ctx, subjectAudit+a.node+".entry", b,
				jetstream.WithMsgID(a.node+"/"+strconv.FormatInt(e.Seq, 10))); err != nil {
				return err
			}
			a.next = e.Seq + 1
		}
	}
	_, err = a.js.Publish(ctx, subjectAudit+a.node+".checkpoint", signed,
		jetstream.WithMsgID(a.node+"/checkpoint/"+strconv.FormatInt(c.Size, 10)))
	return err
}

// NodeKey returns the verifier key of node's audit log, as the node itself
// published it to MANDATE_AUDIT (only that node's user may publish there):
// the key its receipts and checkpoints must verify with.
func (f *Fleet) NodeKey(ctx context.Context, node string) (string, error) {
	m, err := f.Audit.GetLastMsgForSubject(ctx, subjectAudit+node+".key")
	if err != nil {
		return "", fmt.Errorf("fleet: node %s's audit key: %w", node, err)
	}
	return string(m.Data), nil
}

// NodeAudit is what VerifyAudit found of one node's log.
type NodeAudit struct {
	Node       string
	Key        string
	Entries    int64    // entries in the stream
	Checkpoint int64    // entries the latest checkpoint covers
	Runs       []string // the runs the entries name, sorted
	Err        error
}

// VerifyAudit verifies every node's copied log.
func VerifyAudit(ctx context.Context, js jetstream.JetStream) ([]NodeAudit, error) {
	s, err := js.Stream(ctx, StreamAudit)
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", StreamAudit, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subjectAudit+"*.key"))
	if err != nil {
		return nil, err
	}
	var nodes []string
	for subj := range info.State.Subjects {
		nodes = append(nodes, strings.TrimSuffix(strings.TrimPrefix(subj, subjectAudit), ".key"))
	}
	sort.Strings(nodes)
	var out []NodeAudit
	for _, node := range nodes {
		out = append(out, verifyNode(ctx, js, s, node))
	}
	return out, nil
}

func verifyNode(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, node string) NodeAudit {
	na := NodeAudit{Node: node}
	km, err := s.GetLastMsgForSubject(ctx, subjectAudit+node+".key")
	if err != nil {
		na.Err = fmt.Errorf("no verifier key: %w", err)
		return na
	}
	na.Key = string(km.Data)
	cm, err := s.GetLastMsgForSubject(ctx, subjectAudit+node+".checkpoint")
	if err != nil {
		na.Err = fmt.Errorf("no checkpoint: %w", err)
		return na
	}
	want, err := audit.OpenCheckpoint(cm.Data, na.Key)
	if err != nil {
		na.Err = err
		return na
	}
	// A read can come up short of the checkpoint without anything being
	// missing: the consumer's server may be a replica still catching up
	// (just after a restart, say), or a fetch may time out while leaders
	// change. Read again, a little later each time, for up to auditReread;
	// what is still short after that is reported as it is.
	var entries []audit.Entry
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(auditReread)
	for {
		entries, err = readEntries(ctx, s, node)
		if err == nil && int64(len(entries)) >= want.Size || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 3*time.Second)
	}
	if err != nil {
		na.Err = err
		return na
	}
	na.Entries = int64(len(entries))
	runs := map[string]bool{}
	for _, e := range entries {
		if e.Run != "" {
			runs[e.Run] = true
		}
	}
	for r := range runs {
		na.Runs = append(na.Runs, r)
	}
	sort.Strings(na.Runs)
	c, err := audit.VerifyEntries(entries, cm.Data, na.Key)
	na.Checkpoint = c.Size
	na.Err = err
	return na
}

// auditReread is how long verifyNode reads a node's entries again while
// they fall short of its checkpoint.
var auditReread = 30 * time.Second

// readEntries reads node's copied entries, in order, as far as one
// consumer sees them now.
func readEntries(ctx context.Context, s jetstream.Stream, node string) ([]audit.Entry, error) {
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjectAudit + node + ".entry"}})
	if err != nil {
		return nil, err
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	var entries []audit.Entry
	for uint64(len(entries)) < ci.NumPending {
		// Asking for no more than is pending, a fetch ends as soon as it
		// has them rather than waiting out its 5 s for a full batch.
		want := min(uint64(auditMaxBatch), ci.NumPending-uint64(len(entries)))
		batch, err := cons.Fetch(int(want), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var e audit.Entry
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				return nil, fmt.Errorf("an entry that does not decode: %w", err)
			}
			entries = append(entries, e)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		if got == 0 {
			break
		}
	}
	return entries, nil
}
