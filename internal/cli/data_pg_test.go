package cli

import (
	"bytes"
	_ "github.com/mandatevm/mandate/caps/data/pgstore" // PostgreSQL data stores: the build tag postgres's
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/pgtest"
)

// TestDataPostgres: mandate data import and export with --store
// postgres://... and with $MANDATE_DATA_STORE, against a real server; the
// URL's password is never printed.
func TestDataPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	// The server trusts loopback, so the password is never checked: it is
	// there to be hidden.
	url := strings.Replace(srv.NewDatabase(t), "postgres@", "postgres:s3cret@", 1)
	dir := t.TempDir()
	file := filepath.Join(dir, "benefits.json")
	if err := os.WriteFile(file, []byte(`[{"id":"b-alice","owner":"alice","fields":{"plan":"gold","passport":"A1"},"labels":{"passport":["pii:$owner"]}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MANDATE_STATE_DIR", filepath.Join(dir, "state"))
	run := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errb)
		if strings.Contains(out.String()+errb.String(), "s3cret") {
			t.Errorf("mandate %s printed the password:\n%s%s", strings.Join(args, " "), out.String(), errb.String())
		}
		return out.String(), errb.String(), code
	}
	out, stderr, code := run("data", "import", file, "--collection", "benefits", "--store", url)
	if code != 0 || !strings.HasPrefix(out, "imported 1 records into benefits (postgres://postgres:xxxxx@127.0.0.1:") {
		t.Fatalf("import: exit %d\n%s%s", code, out, stderr)
	}
	t.Setenv(host.DataStoreEnv, url)
	out, stderr, code = run("data", "export", "--collection", "benefits")
	if code != 0 || !strings.Contains(out, `"pii:alice"`) {
		t.Fatalf("export with $%s: exit %d\n%s%s", host.DataStoreEnv, code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "data.db")); err == nil {
		t.Error("the state directory's SQLite store was used")
	}
	// A server that is not there: an error, without the password.
	_, stderr, code = run("data", "export", "--collection", "benefits", "--store", "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2")
	if code == 0 || !strings.Contains(stderr, "postgres://u:xxxxx@127.0.0.1:1/db") {
		t.Errorf("no server: exit %d, %s", code, stderr)
	}
}
