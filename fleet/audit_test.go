package fleet

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
	"github.com/nats-io/nats.go/jetstream"
)

// laggingStream answers its first reads of a node's entries as a replica
// still catching up would: a consumer with nothing pending.
type laggingStream struct {
	jetstream.Stream
	lag int // reads left to answer short
}

func (s *laggingStream) OrderedConsumer(ctx context.Context, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	c, err := s.Stream.OrderedConsumer(ctx, cfg)
	if err != nil || s.lag == 0 {
		return c, err
	}
	s.lag--
	return emptyConsumer{c}, nil
}

type emptyConsumer struct{ jetstream.Consumer }

func (c emptyConsumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	ci, err := c.Consumer.Info(ctx)
	if err != nil {
		return nil, err
	}
	short := *ci
	short.NumPending = 0
	return &short, nil
}

// TestVerifyAuditLagging: a read of a node's copied entries that comes up
// short of its checkpoint (CI saw "the checkpoint covers 148 entries, 0
// are here" just after a NATS server restart) is read again; a log that
// really lacks entries still does not verify.
func TestVerifyAuditLagging(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log, err := audit.Open(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for i := range 5 {
		if err := log.ForRun("r1").Record(ctx, kernel.AuditEvent{Task: "t1", Kind: "net", Op: "call:fetch", Decision: kernel.Deny, Reason: strings.Repeat("x", i)}); err != nil {
			t.Fatal(err)
		}
	}
	cp := &auditCopier{node: "node-a", log: log, js: f.JS, s: f.Audit, next: -1}
	if err := cp.copyNew(ctx); err != nil {
		t.Fatal(err)
	}

	s := &laggingStream{Stream: f.Audit, lag: 2}
	na := verifyNode(ctx, f.JS, s, "node-a")
	if na.Err != nil || na.Entries != 5 || na.Checkpoint != 5 || s.lag != 0 {
		t.Errorf("read short twice, then whole: %+v (short reads left %d)", na, s.lag)
	}

	// Short for longer than verifyNode waits: reported as it is.
	defer func(d time.Duration) { auditReread = d }(auditReread)
	auditReread = 300 * time.Millisecond
	s = &laggingStream{Stream: f.Audit, lag: 1 << 20}
	na = verifyNode(ctx, f.JS, s, "node-a")
	if na.Err == nil || !strings.Contains(na.Err.Error(), "the checkpoint covers 5 entries, 0 are here") {
		t.Errorf("a copy that stays short: %+v", na)
	}
}
