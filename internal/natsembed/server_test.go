package natsembed_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mandatevm/mandate/internal/natsembed"
)

// testTimeout is generous: the tests must pass on a loaded 2-core machine.
const testTimeout = 2 * time.Minute

func TestWorkQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if u := srv.ClientURL(); !strings.HasPrefix(u, "nats://127.0.0.1:") || strings.HasSuffix(u, ":4222") {
		t.Errorf("ClientURL() = %q, want nats://127.0.0.1:<random port>", u)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      "WORK",
		Subjects:  []string{"work.>"},
		Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		if _, err := js.Publish(ctx, "work.job", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for len(got) < n {
		batch, err := cons.Fetch(n-len(got), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			got = append(got, m.Data()[0])
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.Error(); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	for i, b := range got {
		if int(b) != i {
			t.Fatalf("message %d = %d, want %d (got %v)", i, b, i, got)
		}
	}
	// A work queue forgets what was acknowledged.
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("after acking all, stream has %d messages, want 0", info.State.Msgs)
	}

	srv.Shutdown()
	srv.Shutdown() // twice is harmless
}

func TestConfigRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  natsembed.Config
		want string
	}{
		{"no store", natsembed.Config{}, "StoreDir is required"},
		{"any address", natsembed.Config{StoreDir: dir, Host: "0.0.0.0"}, "not a loopback address"},
		{"public address", natsembed.Config{StoreDir: dir, Host: "192.0.2.1"}, "not a loopback address"},
		{"bad port", natsembed.Config{StoreDir: dir, Port: 70000}, "not a port"},
		{"cluster without server name", natsembed.Config{StoreDir: dir, Cluster: &natsembed.ClusterConfig{Name: "c", Listen: "127.0.0.1:1"}}, "Config.Name is required"},
		{"cluster without name", natsembed.Config{StoreDir: dir, Name: "a", Cluster: &natsembed.ClusterConfig{Listen: "127.0.0.1:1"}}, "Cluster.Name is required"},
		{"route on any address", natsembed.Config{StoreDir: dir, Name: "a", Cluster: &natsembed.ClusterConfig{Name: "c", Listen: "0.0.0.0:6222"}}, "Cluster.Listen"},
		{"route on random port", natsembed.Config{StoreDir: dir, Name: "a", Cluster: &natsembed.ClusterConfig{Name: "c", Listen: "127.0.0.1:0"}}, "fixed port"},
		{"bad peer", natsembed.Config{StoreDir: dir, Name: "a", Cluster: &natsembed.ClusterConfig{Name: "c", Listen: "127.0.0.1:1", Peers: []string{"127.0.0.1:2"}}}, "is not nats://host:port"},
		{"user without password", natsembed.Config{StoreDir: dir, Users: []natsembed.User{{Name: "a"}}}, "needs a name and a password"},
		{"user twice", natsembed.Config{StoreDir: dir, Users: []natsembed.User{{Name: "a", Password: "p"}, {Name: "a", Password: "q"}}}, "given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := natsembed.Start(context.Background(), tc.cfg)
			if err == nil {
				srv.Shutdown()
				t.Fatalf("Start() = nil error, want one with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start() error = %q, want one with %q", err, tc.want)
			}
		})
	}
}

// TestPortInUse: a server that cannot listen says so, rather than timing out.
func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir(), Port: l.Addr().(*net.TCPAddr).Port})
	if err == nil {
		srv.Shutdown()
		t.Fatal("Start() on a port in use = nil error")
	}
	if ctx.Err() != nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Start() on a port in use: error = %q, want the listen error before the deadline", err)
	}
}

func TestAllowNonLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir(), Host: "0.0.0.0", AllowNonLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
}

// TestPermissionDoc checks the package doc's table against JetStreamUser.
func TestPermissionDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var pub, sub []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(publish|subscribe)\s+(\S+)`).FindAllStringSubmatch(string(src), -1) {
		if m[1] == "publish" {
			pub = append(pub, m[2])
		} else {
			sub = append(sub, m[2])
		}
	}
	u := natsembed.JetStreamUser("n", "p", []string{"x"}, []string{"y"})
	if want := append(pub, "x"); !slices.Equal(u.Publish, want) {
		t.Errorf("JetStreamUser publish = %q, doc says %q", u.Publish, want)
	}
	if want := append(sub, "y"); !slices.Equal(u.Subscribe, want) {
		t.Errorf("JetStreamUser subscribe = %q, doc says %q", u.Subscribe, want)
	}
}

func TestLogger(t *testing.T) {
	var buf syncBuffer
	l := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir(), Logger: l})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	out := buf.String()
	// At info, one line says the server started; its banner (logo,
	// version, paths, limits) is at debug.
	if !strings.Contains(out, "[INFO]  NATS server is ready") {
		t.Errorf("log lacks the ready line; log:\n%s", out)
	}
	for _, banner := range []string{"Starting nats-server", "Version:", "_ ___", "[DEBUG]"} {
		if strings.Contains(out, banner) {
			t.Errorf("log at Info has %q:\n%s", banner, out)
		}
	}
	buf = syncBuffer{}
	l = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug})
	if srv, err = natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir(), Logger: l}); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	if out := buf.String(); !strings.Contains(out, "[DEBUG] Starting nats-server") {
		t.Errorf("the banner is not at debug:\n%s", out)
	}
}

// TestWaitReadyAlone: a cluster member whose peers never come says what it
// waits for when ctx ends.
func TestWaitReadyAlone(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	route := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{
		Name:     "a",
		StoreDir: t.TempDir(),
		Cluster:  &natsembed.ClusterConfig{Name: "c", Listen: route, Peers: []string{"nats://127.0.0.1:1", "nats://127.0.0.1:2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	err = srv.WaitReady(wctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("WaitReady() = %v, want not ready: deadline exceeded", err)
	}
}

// syncBuffer is a bytes.Buffer the server's goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
