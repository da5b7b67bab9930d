// Package approvals keeps the pending approvals of a state directory
// (STATE/approvals.db, SQLite in WAL mode, shared by every process using
// the directory), so that a person's yes reaches only the person: a
// process that needs a yes (mandate run --approve wait, a headless mandate
// mcp serve) records the question and waits; the person answers out of
// band, on the approvals page of mandate ui (ChannelWeb) or with mandate
// approvals yes|no ID from another shell (ChannelCLI). The model's MCP
// client has no way in: it holds neither the UI's token nor a terminal.
//
//	s, err := approvals.Open(stateDir)
//	defer s.Close()
//	ap := &approvals.Approver{Store: s, Waiter: "mandate run trip.hcl",
//		Asked: func(ctx context.Context, a approvals.Approval) {
//			fmt.Fprintf(os.Stderr, "answer with: mandate approvals yes %s\n", a.ID)
//		}}
//	h, err := host.Open(ctx, host.Options{StateDir: stateDir, Approver: ap})
//
// and, in another process:
//
//	s, _ := approvals.Open(stateDir)
//	a, err := s.Answer(ctx, id, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI, By: "alice"}, "")
//
// An approval holds the request whole (every detail uncut: the yes is to
// its digest) and is answered once: Answer is a compare-and-set on its
// state under SQLite's write lock, so of two answers racing exactly one
// wins and the other gets ErrNotPending. An answer on the web page must
// carry the approval's one-time nonce (Nonce, put in the page while the
// approval is pending), consumed by the answer. An approval nobody
// answered by its Expires is expired, a refusal on ChannelTimeout; one
// whose waiting process ended (its PID is gone, on this machine) reads as
// withdrawn, and cannot be answered.
//
// A plan is one approval like any other: a task's plan_submit asks the
// approver once about every effect it intends (kernel.ApprovalRequest
// with Op kernel.PlanOp; Plan holds the items, and Details show each
// whole, "item N" then "item N <detail>", so mandate approvals show and
// the page list them all; Digest covers every item). The store keeps and
// answers it as it does any request. What the yes allows is the kernel's:
// each later effect that would need a yes, on a capability with
// approve_plans, is allowed without a question only when its digest is
// that of an unused item of an approved plan of the same task (each item
// used once, in any order; unused items expire with the task); every
// other check of the capability still applies, and any other effect is
// asked about through this store as before.
//
// The audit log, not this file, is the record of decisions: the kernel
// audits each question with the text the person was shown, the answer,
// its channel and who gave it (kernel.Answer). This store is the mailbox.
package approvals
