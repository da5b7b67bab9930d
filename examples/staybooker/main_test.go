package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
	"github.com/mandatevm/mandate/internal/fakellm"
	"github.com/mandatevm/mandate/internal/testengine"
)

// TestStayBooker runs the example as `go run ./examples/staybooker` does,
// with compromised and with obedient models; story checks each.
func TestStayBooker(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	for _, compromised := range []bool{true, false} {
		var out, errs bytes.Buffer
		if err := story(context.Background(), &out, &errs, t.TempDir(), compromised); err != nil {
			t.Fatalf("compromised=%v: %v\nstdout:\n%s\nstderr:\n%s", compromised, err, &out, &errs)
		}
		t.Logf("compromised=%v:\n%s", compromised, &out)
	}
}

// TestStayBookerHonestEnds: a planner that stops without a final answer
// (its model unreachable, its token budget spent, an answer past its
// bound) fails: exit non-zero, state failed, and the reason, in the
// report and in `mandate runs`.
func TestStayBookerHonestEnds(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	dir, err := exampledir.Find("planner.hcl", "examples/staybooker")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "planner.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// The manifest, with its modules where they are and one planner
	// model's attribute changed.
	manifest := func(from, to string) string {
		m := strings.NewReplacer(`module    = "planner"`, `module    = "`+filepath.ToSlash(filepath.Join(dir, "planner"))+`"`,
			`modules      = ["reader"]`, `modules      = ["`+filepath.ToSlash(filepath.Join(dir, "reader"))+`"]`,
			`file = "data/profile.json"`, `file = "`+filepath.ToSlash(filepath.Join(dir, "data", "profile.json"))+`"`,
			from, to).Replace(string(src))
		if !strings.Contains(m, to) {
			t.Fatalf("the manifest has no %q", from)
		}
		p := filepath.Join(t.TempDir(), "planner.hcl")
		if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, c := range []struct {
		name, manifest, model string
		planner               *fakellm.Server
		reason                string
	}{
		{name: "unreachable", model: gone.URL,
			reason: `it said: planner: agent: step 1: the model call failed: cap_call: EIO: call:chat: llm: chat: endpoint unreachable`},
		{name: "budget", manifest: manifest(`budget        = "200k"`, `budget        = "2k"`),
			reason: `planner: agent: stopped at step 1: the model's token budget, or a bound on a request or answer, is reached`},
		{name: "oversize", manifest: manifest(`max_tokens    = 1024`, "max_tokens    = 1024\n    max_response_bytes = \"1KiB\""),
			planner: fakellm.New(fakellm.WithAPIKey(modelKey), fakellm.WithModels("planner"),
				fakellm.WithScript(fakellm.Text(strings.Repeat("All booked. ", 200)))),
			reason: `exceeds max_response_bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, reader := models(false)
			defer reader.Close()
			model := c.model
			if c.planner != nil {
				defer c.planner.Close()
				model = c.planner.URL()
			} else if model == "" {
				planner, _ := models(false)
				defer planner.Close()
				model = planner.URL()
			}
			s := startSites()
			defer s.close()
			state := t.TempDir()
			var out, errs bytes.Buffer
			rep, err := run(context.Background(), &out, &errs, state, c.manifest, s, model, "planner", reader.URL(), "reader")
			if err != nil {
				t.Fatalf("%v\n%s", err, &errs)
			}
			if rep.Exit == 0 || rep.State != "failed" || !strings.Contains(rep.Error, c.reason) {
				t.Errorf("the run ended %s, exit %d, error %q; want failed, non-zero, with %q\n%s", rep.State, rep.Exit, rep.Error, c.reason, &errs)
			}
			if !strings.Contains(rep.Result, "stopped: ") {
				t.Errorf("the result does not say it stopped: %q", rep.Result)
			}
			var listed bytes.Buffer
			if code := cli.Main([]string{"runs", "--state-dir", state}, nil, &listed, &errs); code != 0 {
				t.Fatalf("mandate runs exited %d: %s", code, &errs)
			}
			if !strings.Contains(listed.String(), " failed ") || !strings.Contains(listed.String(), "planner: agent: ") {
				t.Errorf("mandate runs shows no failure with its reason:\n%s", &listed)
			}
			if len(s.bookings) != 0 {
				t.Errorf("bookings: %q", s.bookings)
			}
		})
	}
}

// TestStayBookerAnswerBesideEffects: a model whose answer claims the
// Skyline Loft (L2) while its tool booked L1. The run's report says both:
// the answer as the model wrote it, and beside it, from the audit log, the
// POST the booking API received, of L1, and its outcome.
func TestStayBookerAnswerBesideEffects(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	planner, reader := modelsAnswering(false, "I booked the Skyline Loft (L2) for 390 EUR.")
	defer planner.Close()
	defer reader.Close()
	s := startSites()
	defer s.close()
	var out, errs bytes.Buffer
	rep, err := run(context.Background(), &out, &errs, t.TempDir(), "", s, planner.URL(), "planner", reader.URL(), "reader")
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, &errs)
	}
	if rep.State != "done" || !strings.Contains(rep.Result, "answer: I booked the Skyline Loft (L2)") {
		t.Fatalf("the run ended %s with %q", rep.State, rep.Result)
	}
	if err := checkBooked(rep, s.booking.URL); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bookings) != 1 || !strings.Contains(s.bookings[0], `"listing_id":"L1"`) {
		t.Fatalf("the booking API received %q", s.bookings)
	}
	var shown bytes.Buffer
	printEffects(&shown, rep)
	t.Logf("%s%s", rep.Result, &shown)
}
