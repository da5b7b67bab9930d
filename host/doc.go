// Package host embeds Mandate in a Go program: an MCP server, an agent
// host, a service that runs tasks for days. It is what "mandate run" runs
// on, so a program gets the same guarantees the CLI gives: every decision
// in the state directory's audit log before its effect, every run in its
// run store (shown by "mandate runs", "mandate graph" and "mandate ui").
//
//	h, err := host.Open(ctx, host.Options{StateDir: dir})
//	if err != nil { ... } // *host.OpenError: no log, no run
//	defer h.Close()
//	m, err := manifest.Load("trip.hcl", vars) // or manifest.Parse of a text built in code
//	run, err := h.Start(ctx, host.RunSpec{Manifest: m, Input: input})
//	events, stop := run.Subscribe(256)
//	go func() {
//		defer stop()
//		for e := range events { // started, spawned, called, denied, flowed, ended, done
//			log.Printf("%s %s %s %s", e.Kind, e.Task, e.Cap, e.Reason)
//		}
//	}()
//	out, err := run.Wait(ctx)
//	fmt.Printf("%s: %s (exit %d)\n", out.State, out.Result, out.Exit)
//
// Host.Subscribe streams the events of every run on the host. Events are
// never waited for: a subscriber that falls behind misses events, and the
// next one it gets counts them (Event.Dropped).
//
// # Sessions: a policy served to a client the kernel does not run
//
// A policy (manifest.LoadPolicy: a session block and tool blocks) is served
// as sessions, one per client connection, the way "mandate mcp serve" does:
//
//	p, err := manifest.LoadPolicy("desk.hcl", vars)
//	pinned, err := h.PinPolicy(ctx, p) // the tools' modules read, built and checked once
//	s, err := h.StartSession(ctx, host.SessionSpec{Policy: pinned, Approver: approvals})
//	defer s.End() // recorded as done
//	for _, t := range s.Tools() { ... } // their modules compiled on the host's engine
//	child, err := s.Task().StartChild(ctx, kernel.ChildSpec{Module: t.Module, Input: args,
//		Caps: []kernel.PassedCap{{Name: "web", Cap: webCap}}}) // one tool call
//
// A session is a run like any other, and nothing about it is wired apart:
// it is in the run store from its start, its kernel has every run's
// configuration (kinds, module resolver, observer, placer, auditor), so a
// tool may spawn children under a spawn capability (the session task is at
// depth 0, a tool's task at 1) and be watched live in "mandate ui", and its
// ended calls are recorded and forgotten as a run's children are. Its root
// task holds every tool's capabilities (SessionCapName) and runs nothing;
// each call is a child the host starts (kernel.Task.StartChild), through
// the one spawn pipeline. The approver is the session's from its kernel's
// start (internal/mcpserve's Approvals ask the person through the client).
//
// # One engine for every run
//
// A host makes one engine (Options.Engine) on its first run and runs every
// run on it, with each module compiled once, by the first run that needs
// it, and kept by digest for the runs after: a second run of a module
// compiles nothing. What is shared is code and what is the same for every
// task: the compiled module, its pre-initialised snapshot (keyed by the
// module's digest, taken with no host call answered) and the registration
// of the host functions, which hold no kernel (a call finds its task, and
// the task's kernel, in its context). What never is: every run has its own
// kernel, capabilities, audit trail and module set (a run spawns only what
// its manifest names), and every task is an instance of its own, with its
// own memory and limits. A module no run uses stays until
// MaxIdleModules more recently used ones push it out; Close closes the
// modules and the engine.
//
// # A long-lived run does not grow
//
// A run's kernel forgets the children that ended once they are recorded
// (kernel.Forget): at most a second after the first one ended, or as soon
// as 256 wait, the run so far is written to the run store, then those
// tasks and every capability they held leave memory. The store keeps them
// (rows are upserted, never replaced by a smaller graph), so the record of
// the run, Outcome.Record and a receipt have every task. Measured by
// BenchmarkSoak, a run of 100,100 tasks in one process (BENCHMARKS.md).
//
// # What the store keeps of results and outputs
//
// The record of each task holds at most its limits.stored_output
// (kernel.Limits.MaxStoredOutput, 1 MiB by default) of its result and of
// each of its stdout and stderr (TaskOutputs): a longer one is cut, and
// the record says so (runstore.Output: Truncated, Dropped, Size, the
// whole). Only the kept bytes are copied; a parent's task_wait shares its
// child's result bytes rather than copying them. So a child that returns
// 48 MiB adds about 1 MiB per task to runs.db, not the result, and the
// host holds the result about once (the child's blob, shared, and the
// copy in Outcome.Result): BENCHMARKS.md, "Results kept". The answer
// itself (Outcome.Result, "mandate run"'s output) is never cut.
//
// What is forgotten cannot matter to a later decision: a task's
// capabilities, and whatever was derived from them, are held by it or its
// descendants, which have all ended; what they spent stays spent in the
// allowances of the capabilities that remain. A revocation made after a
// child was forgotten is not written into that child's row.
package host
