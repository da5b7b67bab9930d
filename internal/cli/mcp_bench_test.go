package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary re-executed as an MCP server over stdio, for the
// benchmarks: the plain server (benchPlainEnv) that BenchmarkMCPToolCall
// measures "mandate mcp serve" against, or "mandate" itself under a CPU
// profile (benchProfileEnv: the file to write), to see where a stdio
// call's time goes:
//
//	MANDATE_BENCH_MCP_PROFILE=/tmp/mcp.prof go test ./internal/cli -run '^$' \
//	    -bench 'BenchmarkMCPToolCall/stdio-vs-plain' -benchtime 2000x
//
// profiles the server of the "mandate" side (the test binary running
// Main, as the built binary would). MANDATE_BENCH_MCP_BASE=BINARY adds a
// third side, "base": another build of mandate (before a change),
// interleaved with the other two.
const (
	benchPlainEnv   = "MANDATE_BENCH_PLAIN_MCP"
	benchProfileEnv = "MANDATE_BENCH_MCP_PROFILE"
	benchServeEnv   = "MANDATE_BENCH_MCP_SERVE" // set on the re-executed test binary that runs Main
	benchBaseEnv    = "MANDATE_BENCH_MCP_BASE"  // another mandate binary, measured beside
)

func init() {
	switch {
	case os.Getenv(benchPlainEnv) != "":
		os.Exit(plainMCPServer())
	case os.Getenv(benchServeEnv) != "":
		f, err := os.Create(os.Getenv(benchProfileEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		args := strings.Split(os.Getenv(benchServeEnv), "\n")
		code := Main(args, os.Stdin, os.Stdout, os.Stderr)
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
}

// plainMCPServer is a plain MCP server on the same SDK, over stdio: the
// one tool echo, {"op", "text"} returning its text, and nothing else
// (no kernel, no task, no label, no log, no store).
func plainMCPServer() int {
	type echoIn struct {
		Op   string `json:"op"`
		Text string `json:"text,omitempty"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo a text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// procCPU is the CPU time (user+system, all its threads) process pid has
// used so far, from /proc (clock ticks of 10 ms); ok is false where
// /proc cannot be read.
func procCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command's ")": state is field 3, utime 14 and
	// stime 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// benchMCPVersusPlain is a no-op call (echo "hi") to "mandate mcp serve"
// over stdio and to a plain MCP server on the same SDK over stdio
// (plainMCPServer), by the same client code, interleaved: each of b.N
// rounds calls one, then the other (which goes first alternates). It
// reports each one's p50 and p99 latency and its server process's CPU
// per call, and the ratio of the p50s. With benchProfileEnv set, the
// Mandate side is the test binary running Main under a CPU profile.
func benchMCPVersusPlain(b *testing.B, bin string) {
	dir, policy := echoBenchPolicy(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"mcp", "serve", policy, "--state-dir", filepath.Join(dir, "state")}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	if prof := os.Getenv(benchProfileEnv); prof != "" {
		cmd = exec.Command(self)
		cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache(), benchServeEnv+"="+strings.Join(args, "\n"))
	}
	plain := exec.Command(self)
	plain.Env = append(os.Environ(), benchPlainEnv+"=1")
	type side struct {
		name string
		cmd  *exec.Cmd
		cs   *mcp.ClientSession
		durs []time.Duration
		cpu  time.Duration
	}
	sides := []*side{{name: "mandate", cmd: cmd}, {name: "plain", cmd: plain}}
	if base := os.Getenv(benchBaseEnv); base != "" {
		// Another build of mandate, measured beside this one.
		cmd := exec.Command(base, "mcp", "serve", policy, "--state-dir", filepath.Join(dir, "state-base"))
		cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
		sides = append(sides, &side{name: "base", cmd: cmd})
	}
	for _, s := range sides {
		s.cs, err = mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: s.cmd}, nil)
		if err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		defer s.cs.Close()
		s.durs = make([]time.Duration, 0, b.N)
	}
	echo := func(cs *mcp.ClientSession) error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": "hi"}})
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) != 1 {
			return fmt.Errorf("echo: %+v", res)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hi" {
			return fmt.Errorf("echo: %+v", res.Content[0])
		}
		return nil
	}
	for range 20 { // warm both
		for _, s := range sides {
			if err := echo(s.cs); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
		}
	}
	cpu0 := make([]time.Duration, len(sides))
	haveCPU := true
	for i, s := range sides {
		var ok bool
		cpu0[i], ok = procCPU(s.cmd.Process.Pid)
		haveCPU = haveCPU && ok
	}
	b.ResetTimer()
	for i := range b.N {
		for j := range sides {
			s := sides[(i+j)%len(sides)]
			t0 := time.Now()
			if err := echo(s.cs); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			s.durs = append(s.durs, time.Since(t0))
		}
	}
	b.StopTimer()
	for i, s := range sides {
		cpu, ok := procCPU(s.cmd.Process.Pid)
		haveCPU = haveCPU && ok
		s.cpu = cpu - cpu0[i]
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	p50 := make([]time.Duration, len(sides))
	for i, s := range sides {
		slices.Sort(s.durs)
		p50[i] = s.durs[len(s.durs)/2]
		b.ReportMetric(us(p50[i]), s.name+"-p50-µs")
		b.ReportMetric(us(s.durs[min(len(s.durs)-1, len(s.durs)*99/100)]), s.name+"-p99-µs")
		if haveCPU {
			b.ReportMetric(us(s.cpu)/float64(b.N), s.name+"-cpu-µs/call")
		}
	}
	b.ReportMetric(float64(p50[0])/float64(p50[1]), "p50-ratio") // mandate/plain
}
