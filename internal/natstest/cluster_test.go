package natstest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/natstest"
)

// TestClusterFailover: an R3 stream keeps taking and serving messages while
// one of three servers is down, a client of that server moves to another, and
// the server catches up when it comes back.
func TestClusterFailover(t *testing.T) {
	user := natsembed.JetStreamUser("node", "secret", []string{"events.>"}, nil)
	c := natstest.StartCluster(t, 3, natstest.WithUsers(user))
	urls := c.URLs()
	ctx, cancel := context.WithTimeout(context.Background(), 4*natstest.Timeout)
	defer cancel()

	reconnected := make(chan string, 16)
	// Server 1 first, and only it until it goes: DontRandomize.
	nc, err := nats.Connect(strings.Join([]string{urls[1], urls[0], urls[2]}, ","),
		nats.UserInfo("node", "secret"),
		nats.DontRandomize(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectHandler(func(nc *nats.Conn) { reconnected <- nc.ConnectedUrl() }),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.ConnectedUrl(); got != urls[1] {
		t.Fatalf("connected to %s, want %s", got, urls[1])
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "EVENTS",
		Subjects: []string{"events.>"},
		Replicas: 3,
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		publish(ctx, t, js, i)
	}

	c.Stop(1)
	select {
	case u := <-reconnected:
		if u == urls[1] {
			t.Fatalf("reconnected to the stopped server %s", u)
		}
	case <-ctx.Done():
		t.Fatal("client did not reconnect after its server stopped")
	}
	for i := 100; i < 200; i++ {
		publish(ctx, t, js, i)
	}
	cons, err := retry(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for len(seen) < 200 {
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 200 messages before the deadline", len(seen))
		}
		batch, err := cons.Fetch(200-len(seen), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			continue // the consumer's leader may be moving; ask again
		}
		for m := range batch.Messages() {
			seen[string(m.Data())] = true
			_ = m.Ack() // a lost ack only redelivers; seen dedupes
		}
	}
	for i := range 200 {
		if !seen[fmt.Sprint(i)] {
			t.Errorf("message %d not consumed", i)
		}
	}

	c.Restart(1)
	// Caught up: the stream's leader counts n1 as a current replica with no lag.
	for {
		info, err := st.Info(ctx)
		if err == nil && info.State.Msgs != 200 {
			t.Fatalf("stream has %d messages, want 200", info.State.Msgs)
		}
		if err == nil && replicaCurrent(info.Cluster, "n1") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("n1 did not catch up: last info %+v, error %v", info, err)
		}
		wait(ctx, 100*time.Millisecond)
	}
}

// publish publishes message i until the stream acknowledges it. While a
// server is down the stream may be electing a leader; the message ID makes a
// retry after a lost ack harmless.
func publish(ctx context.Context, t *testing.T, js jetstream.JetStream, i int) {
	t.Helper()
	_, err := retry(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
		return js.Publish(ctx, "events.e", []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint("m", i)))
	})
	if err != nil {
		t.Fatalf("publish %d: %v", i, err)
	}
}

// retry calls f, with 5 s each time, until it succeeds or ctx is done.
func retry[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		wait(ctx, 50*time.Millisecond)
	}
}

// wait is the pause between polls, not a synchronization: every caller
// checks again afterwards.
func wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func replicaCurrent(ci *jetstream.ClusterInfo, name string) bool {
	if ci == nil {
		return false
	}
	if ci.Leader == name {
		return true
	}
	for _, p := range ci.Replicas {
		if p.Name == name {
			return p.Current && !p.Offline && p.Lag == 0
		}
	}
	return false
}

// TestPermissions: a user allowed mandate.node.a.> and the JetStream minimum
// uses JetStream (a stream, a consumer, a key-value bucket) but cannot
// publish to another node's subjects.
func TestPermissions(t *testing.T) {
	srv := natstest.Start(t, natstest.WithUsers(
		natsembed.JetStreamUser("a", "pa", []string{"mandate.node.a.>"}, []string{"mandate.node.a.>"}),
	))
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Timeout)
	defer cancel()

	for _, tc := range []struct {
		name string
		opt  nats.Option
	}{
		{"no user", func(*nats.Options) error { return nil }},
		{"wrong password", nats.UserInfo("a", "wrong")},
	} {
		if nc, err := nats.Connect(srv.ClientURL(), tc.opt, nats.MaxReconnects(0)); err == nil {
			nc.Close()
			t.Errorf("%s: Connect() = nil error, want an authorization error", tc.name)
		}
	}

	asyncErrs := make(chan error, 16)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("a", "pa"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { asyncErrs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NODE_A", Subjects: []string{"mandate.node.a.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "mandate.node.a.x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("kv.Get(k) = %v, %v; want v", e, err)
	}

	if err := nc.Publish("mandate.node.b.x", []byte("no")); err != nil {
		t.Fatal(err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-asyncErrs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("publish to mandate.node.b.x: error %v, want a permissions violation", err)
		} else if !strings.Contains(err.Error(), "mandate.node.b.x") {
			t.Errorf("permissions violation %q does not name mandate.node.b.x", err)
		}
	case <-ctx.Done():
		t.Fatal("publish to mandate.node.b.x: no permissions violation")
	}
	if _, err := nc.SubscribeSync("mandate.node.b.>"); err != nil {
		t.Fatal(err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-asyncErrs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("subscribe to mandate.node.b.>: error %v, want a permissions violation", err)
		}
	case <-ctx.Done():
		t.Fatal("subscribe to mandate.node.b.>: no permissions violation")
	}
}
