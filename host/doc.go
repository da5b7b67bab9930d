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
// What is forgotten cannot matter to a later decision: a task's
// capabilities, and whatever was derived from them, are held by it or its
// descendants, which have all ended; what they spent stays spent in the
// allowances of the capabilities that remain. A revocation made after a
// child was forgotten is not written into that child's row.
package host
