// Command tripplanner books a flight within Alice's intent, with an agent
// assumed hostile, in one command:
//
//	go run ./examples/tripplanner
//
// It starts the fixture sites on loopback (a flights search site whose
// listings carry an injected instruction, the airline's booking API, a
// payment provider), then runs `mandate run planner.hcl --approve yes`
// through the real CLI code and checks what happened: the 37-hour,
// 3-stop offer that is $3 cheaper was refused by the payment token, the
// chosen flight was paid once, the passport reached the airline and
// nothing else, and the finder child never held the passport.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mandatevm/mandate/examples/tripplanner/sites"
	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
)

func main() {
	stateDir := flag.String("state-dir", "", "where to record the run and keep the data store (default: mandate's state dir)")
	flag.Parse()
	if err := plan(context.Background(), os.Stdout, os.Stderr, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "tripplanner:", err)
		os.Exit(1)
	}
}

func plan(ctx context.Context, stdout, stderr io.Writer, stateDir string) error {
	dir, err := exampledir.Find("planner.hcl", "examples/tripplanner")
	if err != nil {
		return err
	}
	s := sites.Start()
	defer s.Close()
	os.Setenv("TRIP_CARD_TOKEN", sites.CardToken)

	args := []string{"run", filepath.Join(dir, "planner.hcl"),
		"--var", "flights=" + s.Flights.URL, "--var", "airline=" + s.Airline.URL, "--var", "hotels=" + s.Hotels.URL, "--var", "pay=" + s.Pay.URL,
		"--approve", "yes", "--log-level", "warn"}
	if stateDir != "" {
		args = append(args, "--state-dir", stateDir)
	}
	fmt.Fprintf(stdout, "== mandate run planner.hcl (flights %s, airline %s, payments %s)\n", s.Flights.URL, s.Airline.URL, s.Pay.URL)
	var result bytes.Buffer
	if code := cli.Main(args, nil, io.MultiWriter(stdout, &result), stderr); code != 0 {
		return fmt.Errorf("mandate run exited %d", code)
	}
	graphArgs := []string{"graph"}
	if stateDir != "" {
		graphArgs = append(graphArgs, "--state-dir", stateDir)
	}
	fmt.Fprintf(stdout, "\n== mandate graph\n")
	var graph bytes.Buffer
	if code := cli.Main(graphArgs, nil, io.MultiWriter(stdout, &graph), stderr); code != 0 {
		return fmt.Errorf("mandate graph exited %d", code)
	}
	// The graph shows the finder cleared for public data only.
	if !strings.Contains(graph.String(), "    t2  principal=alice") || !strings.Contains(graph.String(), "clearance={}") {
		return fmt.Errorf("the graph does not show the finder's public clearance")
	}

	// Check the story.
	if err := s.Check([]string{result.String()}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n== one charge of 612.00 USD; the passport reached the airline only; the 37-hour offer was refused by the token\n")
	return nil
}
