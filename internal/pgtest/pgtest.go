// Package pgtest starts a real PostgreSQL server for tests: Debian's
// server binaries (package postgresql; /usr/lib/postgresql/N/bin, not on
// PATH), a cluster made by initdb in a temporary folder, listening on a
// free loopback port and a unix socket in that folder, stopped when the
// test ends.
//
//	srv := pgtest.Start(t)
//	url := srv.NewDatabase(t) // postgres://postgres@127.0.0.1:PORT/db1?sslmode=disable
//
// initdb refuses to run as root: as root, the cluster belongs to the
// postgres user (which the Debian package creates) and every server
// command runs through runuser -u postgres; as anyone else, as that user.
// Where there are no binaries or the server cannot start, the test is
// skipped and says why, except with CI=true (CI installs postgresql),
// where it fails.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server that a test started. Its
// superuser is "postgres", trusted without a password on loopback.
type Server struct {
	Port   int
	Socket string // the folder of its unix socket
	dir    string // the temporary folder: data/, sock/, log
	bin    string
	runAs  string // "postgres" when run as root, else ""
	dbs    atomic.Int64
}

// unavailable skips the test, or fails it with CI=true.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: %s (CI=true: .ci/run installs postgresql, so this fails rather than skips)", msg)
	}
	t.Skipf("pgtest: %s: skipping (apt-get install postgresql to run it)", msg)
}

// Bin returns the folder of the newest PostgreSQL server binaries
// installed (Debian's /usr/lib/postgresql/N/bin, else initdb's folder on
// PATH), or "".
func Bin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// version is N of /usr/lib/postgresql/N/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start starts a server for t and stops it when t ends. It skips t (fails
// it with CI=true) when the server cannot be started.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin()
	if bin == "" {
		unavailable(t, "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)")
	}
	s := &Server{bin: bin}
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable(t, "running as root, and there is no postgres user to run initdb as: %v", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			unavailable(t, "running as root, and there is no runuser to run initdb as postgres: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		s.runAs = "postgres"
	}
	// A short folder: a unix socket's path is limited to about 100 bytes.
	base := os.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "mandate-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir, s.Socket = dir, filepath.Join(dir, "sock")
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Mkdir(s.Socket, 0o700); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		for _, p := range []string{dir, s.Socket} {
			if err := os.Chown(p, uid, gid); err != nil {
				unavailable(t, "cannot give %s to the postgres user: %v", p, err)
			}
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.command("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale",
		"--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		unavailable(t, "initdb: %v\n%s", err, out)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, s.Socket)
		out, err := s.command("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
		if err == nil {
			s.Port = port
			t.Cleanup(s.stop)
			return s
		}
		s.kill() // a server that started but did not answer in time
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	unavailable(t, "the server did not start: %v", lastErr)
	return nil
}

// command runs a server binary, through runuser as postgres when root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir // a folder the server's user can enter
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// stop stops the server (fast shutdown), killing it when that fails.
func (s *Server) stop() {
	if err := s.command("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "-t", "30", "stop").Run(); err != nil {
		s.kill()
	}
}

// kill kills the postmaster named in postmaster.pid, if any.
func (s *Server) kill() {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGQUIT)
	for i := 0; i < 50; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL returns the URL of database db on the server, over loopback TCP.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("db%d", s.dbs.Add(1))
	s.Exec(t, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return s.URL(name)
}

// Exec runs SQL statements in database db, failing t on an error.
func (s *Server) Exec(t testing.TB, db, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", db, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}
