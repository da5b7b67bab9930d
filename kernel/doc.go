// Package kernel is Mandate's trusted core: tasks, capability tables,
// the derivation tree, revocation, blobs and labels, and the mediator every
// guest call passes through.
//
// The kernel imports no engine and no capability kind; they plug in through
// sandbox.Engine and Kind, the way drivers plug into database/sql:
//
//	eng, _ := wazero.New(ctx, sandbox.Config{CacheDir: dir})
//	k, _ := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{net.New()}})
//	scope, _ := k.Grant("net", kindapi.GrantContext{}, []byte(`{"origin":"https://flights.example"}`))
//	mod, _ := eng.Compile(ctx, wasm)
//	t, _ := k.Start(ctx, kernel.TaskSpec{
//		Module: mod, Principal: "alice",
//		Grants: []kernel.GrantSpec{{Name: "flights", Kind: "net", Scope: scope}},
//	})
//	err := t.Wait(ctx)
//	result, _ := t.Result()
//
// # Locks
//
// The kernel has eight mutexes. The atomics (Kernel.live, Cap.revoked,
// Cap.dropped), a task's done channel and the pool of Calls are not locks.
//
//   - Kernel.mu protects the kernel's tasks and caps, the counters that
//     number them, and every Cap's children (the tree's downward links).
//   - Task.mu protects a task's mutable state: its names, label, result,
//     state and error, last error and denials, children count, kids and run
//     context.
//   - CapTable.mu serializes the changes to a task's handle table (what
//     its slots hold, its free list, live count, blob bytes and blob
//     limit). Reading a slot takes no lock: a sequence lock on the
//     slot's generation (captable.go, cell), so a capability call's
//     lookup of its handle costs no lock.
//   - allowance.mu protects the uses and spending counted against one
//     capability's max_uses and budget.
//   - bucket.mu protects the tokens of one capability's rate.
//   - history.mu protects the uses in one capability's history.
//   - Cap.approvedMu protects the effects a person approved on one
//     capability (approve_mints).
//   - plans.mu protects a task's plans: how many it submitted, the
//     approved ones and which of their items were used (plan.go).
//   - outputWriter.mu protects what is kept of one of a task's streams
//     (stdout or stderr) and what of it was forwarded to the log.
//
// The lock order, outermost first. A lock is taken only while holding
// locks above it in this list (or, for 3 to 5, the lock of the same sort
// of an ancestor capability), never below:
//
//  1. CapTable.mu. A leaf: Task.Lookup scans the table for a root
//     grant's handle under it (CapTable.handleOf) and records a failure
//     with Task.fail, which takes Task.mu, after letting it go.
//  2. Task.mu. A leaf. No code holds two tasks' Task.mu at once:
//     Kernel.Forget and pendingChild.start, which lock a parent's and its
//     children's, take them one at a time, and Task.run waits for its
//     children with none held.
//  3. history.mu, of the histories on one capability's chain, ancestor
//     before descendant (checkWithHistory).
//  4. bucket.mu, of the rates on one capability's chain, ancestor before
//     descendant (takeRate).
//  5. allowance.mu, of the allowances on one capability's chain, ancestor
//     before descendant (reserveAllowance).
//  6. Kernel.mu. A leaf, never held together with any other lock:
//     Kernel.Graph lets it go before it locks the tasks, Kernel.Forget
//     takes it after it let the tasks' go, and Kernel.link, Kernel.Revoke,
//     Kernel.Tasks, Kernel.newTask and Task.launch take no other lock
//     under it.
//  7. Cap.approvedMu. A leaf (Cap.wasApproved, Cap.remember).
//     plans.mu, likewise a leaf (Task.usePlanItem, Task.hasPlans;
//     Task.SubmitPlan and Task.expirePlans let it go before they ask or
//     audit).
//  8. outputWriter.mu. A leaf among the kernel's locks, though it calls
//     the task's logger (see below).
//
// So the leaves, never held while another lock is acquired, are
// CapTable.mu, Task.mu, Kernel.mu, Cap.approvedMu, plans.mu and
// outputWriter.mu; history.mu, bucket.mu and allowance.mu are held while
// acquiring only the next lock of the same sort down the same chain. No
// two sorts of lock are taken in both orders anywhere.
//
// Walking a chain. A rate, a max_uses, a budget and a history bound a
// capability's whole subtree, so a call walks its capability's parent
// chain to the root; the chain crosses task boundaries (a capability
// passed to a child has its ancestors in the parent's table). takeRate,
// reserveAllowance and checkWithHistory collect the chain's buckets,
// allowances or histories from the capability up to the root, lock them
// root first, hold them all while they check and charge (or, for
// histories, evaluate the constraints and record the use), and unlock them
// child first. Every chain is a path from a root, so two chains sharing
// two of these locks take them in the same order, and concurrent calls on
// one subtree cannot deadlock; each bucket, allowance and history belongs
// to one Cap (Kernel.grant, Kernel.mint, Kernel.link make a new one), so a
// chain never meets one twice. The three walks never overlap: Task.reserve
// lets the buckets go before it reserves the allowances, and the
// constraints are checked after both. The walks that give back, giveRate,
// releaseAllowance, refundAmount and use.end (through history.replace),
// go from the capability to the root one lock at a time, never holding
// two. Every other walk of a chain (effectiveLimits, approvalKey,
// displayName, evalConstraints, the ancestry in Kernel.record) takes no
// lock: what it reads does not change once a capability is linked.
//
// Calling out. The kernel calls what plugs into it with no lock of its
// own held: the kinds (Kind.Name, Grant, Info, Prepare, Narrow and
// Describe; an Op's Reserve, Vars, Show and Effect; a Scope's Contains and
// MarshalJSON; Info.Amounts when a budget is parsed or shown in the
// graph), the Auditor
// (Kernel.record, which Task.deny calls before it takes Task.mu), the
// Approver (Task.approve, between Cap.wasApproved and Cap.remember), the
// Observer (TaskStarted at the end of Task.launch; TaskEnded at the end of
// Task.run, once the task's done channel is closed), the Placer and the
// ModuleResolver (Task.guestChild), ChildSpec.Made (Task.StartChild), and
// the engine (Engine.Host in New and RegisterHost, Module.Run in Task.run,
// guest memory in the host functions). None of them can deadlock against a kernel lock.
// What does run under one, and so must never call back into the kernel:
//
//   - a Constraint's Eval and Source, under the chain's history locks
//     (checkWithHistory calls evalConstraints with them held, so that a
//     use is checked and recorded in one step), and its References, under
//     Kernel.mu (Kernel.link, through newHistory and Cap.flags);
//   - a kind's Info.Amounts.FormatAmount, under every allowance lock of
//     the chain, when reserveAllowance refuses a call for its budget (the
//     message states the amounts, through Cap.formatAmount);
//   - the methods of an error: Task.deny and Task.fail compute err.Error(),
//     and Task.deny kindapi.ErrnoOf(err), under Task.mu, and err may be or wrap
//     an error a kind, the approver or the auditor returned;
//   - the task's logger: outputWriter's Write, flushLine and close log
//     under outputWriter.mu.
package kernel
