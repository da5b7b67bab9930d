package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/optional"
)

// TestOptionalPartsMissing: a build without the embedded NATS server or
// PostgreSQL (the default build: internal/optional) says so when asked
// for one, names the build tag that brings it in, and never prints a
// URL's password; mandate version lists what the build has.
func TestOptionalPartsMissing(t *testing.T) {
	n, p := optional.NATSServer, optional.Postgres
	defer func() {
		optional.NATSServer, optional.Postgres = n, p
	}()
	optional.NATSServer, optional.Postgres = nil, nil
	dir := t.TempDir()
	t.Setenv("MANDATE_STATE_DIR", filepath.Join(dir, "state"))
	run := func(args ...string) (string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errb)
		return out.String() + errb.String(), code
	}

	got, code := run("node", "--embedded-nats", filepath.Join(dir, "js"), "--name", "a")
	if code != exitUsage || !strings.Contains(got, "built without the embedded NATS server") ||
		!strings.Contains(got, "go install -tags natsserver ./cmd/mandate") || !strings.Contains(got, "--nats URL") {
		t.Errorf("node --embedded-nats without the server: exit %d\n%s", code, got)
	}

	t.Setenv(host.DataStoreEnv, "postgres://mandate:s3cret@127.0.0.1:1/mandate")
	got, code = run("data", "export", "--collection", "benefits")
	if code == 0 || !strings.Contains(got, "built without PostgreSQL data stores") ||
		!strings.Contains(got, "go install -tags postgres ./cmd/mandate") || strings.Contains(got, "s3cret") {
		t.Errorf("a postgres:// store without PostgreSQL: exit %d\n%s", code, got)
	}

	got, _ = run("version")
	if !strings.Contains(got, "optional   natsserver no, postgres no (go install -tags 'natsserver postgres' ./cmd/mandate builds them in)\n") {
		t.Errorf("mandate version:\n%s", got)
	}
	optional.Postgres = func(ctx context.Context, url string) (data.Backend, error) { return nil, nil }
	got, _ = run("version")
	if !strings.Contains(got, "optional   natsserver no, postgres yes (go install -tags 'natsserver' ./cmd/mandate builds them in)\n") {
		t.Errorf("mandate version with PostgreSQL:\n%s", got)
	}
}
