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
