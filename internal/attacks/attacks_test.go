package attacks_test

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
)

// Law names used in the table (ARCHITECTURE.md, "The kernel's laws").
const (
	lawHandles    = "law 2: handles are task-local index+generation"
	lawNarrower   = "law 3: only narrower (Narrow + Contains)"
	lawRevoke     = "law 4: revocation is transitive, checked at every use"
	lawBudget     = "law 5: budgets reserved on every ancestor's ledger"
	lawLabels     = "law 6: labels only rise"
	lawSink       = "law 7: every sink checks the flow"
	lawBounded    = "law 10: bounded and fail-closed"
	lawScope      = "caps/net origin and path canonicalisation"
	lawPayScope   = "caps/pay payee/amount/idempotency checks"
	lawApproval   = "approve_when / approve_above: a person's yes"
	lawPrincipal  = "caps/data rules resolved against the task's principal"
	lawDeclassify = "caps/declassify: audited, projected, caller's label kept"
)

// attacks is the suite: one row per attack (a few attacks have a row per
// variant). SECURITY.md's "Attack suite" table lists the same rows.
var attacks = []attack{
	{
		name: "forged-handles", law: lawHandles,
		want: map[string]string{
			"call_zero": "EBADHANDLE", "call_all_ones": "EBADHANDLE", "call_gen_zero": "EBADHANDLE",
			"call_next_gen": "EBADHANDLE", "call_max_gen": "EBADHANDLE", "call_unused_slot": "EBADHANDLE",
			"call_max_index": "EBADHANDLE", "derive": "EBADHANDLE", "revoke": "EBADHANDLE",
			"describe": "EBADHANDLE", "blob_len": "EBADHANDLE", "blob_read": "EBADHANDLE",
			"task_wait": "EBADHANDLE", "task_kill": "EBADHANDLE", "task_result": "EBADHANDLE",
			"drop": "EBADHANDLE", "spawn": "EBADHANDLE", "spray": "EBADHANDLE", "real_after": "ESUCCESS",
		},
		audit: []string{"deny call:fetch EBADHANDLE", "deny derive EBADHANDLE", "deny revoke EBADHANDLE", "deny spawn EBADHANDLE", "deny drop EBADHANDLE"},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/api/real")
		},
	},
	{
		name: "stale-handles", law: lawHandles,
		want: map[string]string{
			"drop_narrow": "ESUCCESS", "stale_call": "EBADHANDLE", "stale_derive": "EBADHANDLE",
			"stale_revoke": "EBADHANDLE", "stale_describe": "EBADHANDLE", "stale_drop": "EBADHANDLE",
			"fresh_call": "ESUCCESS", "drop_blob": "ESUCCESS", "stale_blob_read": "EBADHANDLE",
			"stale_blob_len": "EBADHANDLE", "stale_blob_result": "EBADHANDLE", "spawn": "ESUCCESS",
			"drop_task": "ESUCCESS", "spawn2": "ESUCCESS", "stale_task_wait": "EBADHANDLE",
			"stale_task_kill": "EBADHANDLE", "drop_root": "ESUCCESS", "lookup_dropped": "ENOTFOUND",
			"stale_root_charge": "EBADHANDLE",
			"#same_slot":        "true", "#blob_same_slot": "true",
		},
		audit: []string{"deny call:fetch EBADHANDLE", "deny revoke EBADHANDLE", "deny task_wait EBADHANDLE", "deny call:charge EBADHANDLE"},
		check: func(t *testing.T, e *env, o *outcome) {
			for _, k := range []string{"#same_slot", "#blob_same_slot"} {
				if o.result[k] != "true" {
					t.Errorf("%s = %s: the attack did not get the freed slot reused", k, o.result[k])
				}
			}
			e.onlyPaths(t, "/api/fresh")
			if _, n := e.providerTotal(); n != 0 {
				t.Errorf("the provider saw %d charges", n)
			}
		},
	},
	{
		name: "foreign-handles", law: lawHandles,
		want:  foreignWant(),
		audit: []string{"deny call:fetch EBADHANDLE", "deny derive EBADHANDLE", "deny revoke EBADHANDLE", "deny blob_len EBADHANDLE"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "recycled-handles", law: lawHandles + " (a slot is retired at its last generation)",
		limits: kernel.Limits{Timeout: hangGuard},
		want: map[string]string{
			"first_after": "EBADHANDLE", "retired_slot": "EBADHANDLE", "alias": "ENONE",
			"#moved": "1",
		},
		audit: []string{"deny blob_len EBADHANDLE"},
		check: func(t *testing.T, e *env, o *outcome) {
			if o.result["#moved"] != "1" {
				t.Errorf("the slot was never retired after %s generations", o.result["#iterations"])
			}
		},
	},
	{
		name: "oob-pointers", law: lawBounded + " (EFAULT before any effect)",
		want: map[string]string{
			"lookup_name_oob": "EFAULT", "lookup_out_oob": "EFAULT", "call_op_oob": "EFAULT",
			"call_args_oob": "EFAULT", "fetch_out_oob": "EFAULT", "fetch_out_unaligned_end": "EFAULT",
			"charge_out_oob": "EFAULT", "derive_out_oob": "EFAULT", "spawn_out_oob": "EFAULT",
			"spawn_req_oob": "EFAULT", "describe_out_oob": "EFAULT", "input_out_oob": "EFAULT",
			"blob_create_oob": "EFAULT", "blob_read_buf_oob": "EFAULT", "blob_read_out_oob": "EFAULT",
			"blob_len_out_oob": "EFAULT", "last_error_oob": "EFAULT", "wait_out_oob": "EFAULT",
			"fetch_ok": "ESUCCESS",
		},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/api/oob-effect") // once: the good call
			// The audited card never got as far as its write-ahead entry.
			if n := o.count("", "call:charge", ""); n != 0 {
				t.Errorf("%d audit entries for a charge whose out pointer was bad", n)
			}
			if _, n := e.providerTotal(); n != 0 || e.provider.Requests() != 0 {
				t.Errorf("the provider saw %d charges", n)
			}
			g := e.k.Graph()
			if len(g.Tasks) != 1 {
				t.Errorf("%d tasks in the graph, want the attacker alone (a spawn happened)", len(g.Tasks))
			}
			for _, c := range g.Caps {
				if c.Parent != "" {
					t.Errorf("a capability was derived: %+v", c)
				}
			}
		},
	},
	{
		name: "length-overflow", law: lawBounded + " (limits before ranges, 64-bit arithmetic)",
		want: map[string]string{
			"lookup_len_wrap": "ELIMIT", "lookup_len_limit": "ELIMIT", "op_len_wrap": "EINVAL",
			"op_len_limit": "EINVAL", "args_len_wrap": "ELIMIT", "args_len_4g": "ELIMIT",
			"args_len_limit": "ELIMIT", "derive_len_wrap": "ELIMIT", "blob_create_wrap": "EFAULT",
			"blob_create_limit": "ELIMIT", "blob_create_past_end": "EFAULT", "read_buf_wrap": "EFAULT",
			"read_offset_past_end": "EINVAL", "read_offset_4g": "EINVAL", "last_error_wrap": "EFAULT",
			"spawn_len_wrap": "ELIMIT", "read_ok": "ESUCCESS", "#read": "world",
		},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t)
			if o.result["#read"] != "world" {
				t.Errorf("read %q", o.result["#read"])
			}
		},
	},
	{
		name: "memory-bomb/slices", guest: "memory-bomb", mode: "slices", law: lawBounded + " (memory.grow refused past the limit)",
		limits: kernel.Limits{Memory: 32 << 20}, state: kernel.TaskOutOfMemory,
	},
	{
		name: "memory-bomb/huge", guest: "memory-bomb", mode: "huge", law: lawBounded + " (memory.grow refused past the limit)",
		limits: kernel.Limits{Memory: 32 << 20}, state: kernel.TaskOutOfMemory,
	},
	{
		name: "memory-bomb/grow", guest: "memory-bomb", mode: "grow", law: lawBounded + " (memory.grow refused past the limit)",
		limits: kernel.Limits{Memory: 32 << 20}, state: kernel.TaskOutOfMemory,
	},
	{
		name: "table-exhaustion/grow", guest: "table-bomb", law: lawBounded + " (the engine caps every table: max(initial, 10,000) elements)",
		raw: true, limits: kernel.Limits{Memory: 16 << 20},
		check: func(t *testing.T, e *env, o *outcome) {
			rounds, size := tableResult(t, o.raw)
			if rounds != 0 || size != 0 {
				t.Errorf("table.grow succeeded %d times (table of %d elements); want -1 at once (the cap is 10,000, a round is 65,536)", rounds, size)
			}
		},
	},
	{
		name: "table-exhaustion/steps", guest: "table-bomb-steps", law: lawBounded + " (the engine caps every table: max(initial, 10,000) elements)",
		raw: true, limits: kernel.Limits{Memory: 16 << 20},
		check: func(t *testing.T, e *env, o *outcome) {
			rounds, size := tableResult(t, o.raw)
			if rounds != 10 || size != 10000 {
				t.Errorf("table.grow by 1,000 succeeded %d times (table of %d elements); want 10 (10,000)", rounds, size)
			}
		},
	},
	{
		name: "table-exhaustion/initial", guest: "table-bomb-huge", law: lawBounded + " (a table's declared size is host memory)",
		raw: true, limits: kernel.Limits{Memory: 16 << 20}, refused: true,
	},
	{
		name: "infinite-loop/spin", guest: "infinite-loop", mode: "spin", law: lawBounded + " (wall-clock timeout)",
		limits: kernel.Limits{Timeout: time.Second}, state: kernel.TaskTimedOut,
	},
	{
		name: "infinite-loop/hostcalls", guest: "infinite-loop", mode: "hostcalls", law: lawBounded + " (wall-clock timeout)",
		limits: kernel.Limits{Timeout: time.Second}, state: kernel.TaskTimedOut,
	},
	{
		name: "infinite-loop/sleep", guest: "infinite-loop", mode: "sleep", law: lawBounded + " (wall-clock timeout)",
		limits: kernel.Limits{Timeout: time.Second}, state: kernel.TaskTimedOut,
	},
	{
		name: "infinite-loop/wait-child", guest: "infinite-loop", mode: "wait-child", law: lawBounded + " (a child never outlives its parent's deadline)",
		limits: kernel.Limits{Timeout: time.Second}, state: kernel.TaskTimedOut,
		check: func(t *testing.T, e *env, o *outcome) { e.allStopped(t) },
	},
	{
		name: "deep-recursion", law: lawBounded + " (the Go stack lives in bounded linear memory)",
		limits: kernel.Limits{Memory: 32 << 20}, state: kernel.TaskOutOfMemory,
	},
	{
		name: "stdout-flood", law: lawBounded + " (output limit per stream)",
		limits: kernel.Limits{MaxOutput: 64 << 10, Timeout: hangGuard},
		want:   map[string]string{"survived": "ESUCCESS"},
		check: func(t *testing.T, e *env, o *outcome) {
			for name, out := range map[string]kernel.Output{"stdout": o.task.Stdout(), "stderr": o.task.Stderr()} {
				if len(out.Data) > 64<<10 || !out.Truncated || out.Dropped < 48<<20 {
					t.Errorf("%s kept %d bytes, truncated=%v, dropped %d", name, len(out.Data), out.Truncated, out.Dropped)
				}
			}
		},
	},
	{
		name: "log-flood", law: "law 8: denials audited with a digest, never the arguments; bounded reasons",
		limits: kernel.Limits{Timeout: hangGuard},
		want: map[string]string{
			"unknown_op": "ENOTSUP", "derive_garbage": "EINVAL", "vault_big_body": "ESUCCESS",
		},
		audit: []string{"deny call:" + "0ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ" + " ENOTSUP", "allow call:fetch ESUCCESS"},
		check: func(t *testing.T, e *env, o *outcome) {
			logs := e.logs.String()
			if n := strings.Count(logs, "FLOODMARK"); n > 100 {
				t.Errorf("the kernel log copied the guest's arguments %d times", n)
			}
			if len(logs) > 4<<20 {
				t.Errorf("the kernel log grew to %d bytes for ~220 calls", len(logs))
			}
			for _, en := range o.entries {
				if strings.Contains(en.Reason, "FLOODMARK") || len(en.Reason) > 2048 {
					t.Errorf("audit entry %d carries the guest's arguments or a huge reason (%d bytes)", en.Seq, len(en.Reason))
				}
				if en.Op == "call:fetch" && en.Decision == "allow" && len(en.Args) != 64 {
					t.Errorf("an audited fetch has args %q, want a SHA-256 digest", en.Args)
				}
			}
			if n := o.count("deny", "", "ENOTSUP"); n != 100 {
				t.Errorf("%d ENOTSUP denials audited, want 100", n)
			}
		},
	},
	{
		name: "spawn-bomb", law: lawBounded + " (max_children, max_depth, kernel MaxTasks)",
		opts:   envOptions{maxTasks: 10, spec: map[string]string{"spawner": `"max_depth":8,"max_children":1000`}},
		limits: kernel.Limits{Timeout: hangGuard},
		want:   map[string]string{"stopped_by": "ELIMIT", "descendants_stopped_by": "ELIMIT"},
		audit:  []string{"deny spawn ELIMIT"},
		check: func(t *testing.T, e *env, o *outcome) {
			e.allStopped(t)
			if n := len(e.k.Graph().Tasks); n > 200 {
				t.Errorf("%d tasks were started", n)
			}
		},
	},
	{
		name: "spawn-chain", law: lawBounded + " (max_depth, at most kernel.MaxSpawnDepth) and " + lawNarrower,
		opts:   envOptions{spec: map[string]string{"spawner": `"max_depth":8`}},
		limits: kernel.Limits{Timeout: hangGuard},
		want:   map[string]string{"stopped_by": "ELIMIT", "widen_depth": "EDENIED", "#depth": "8"},
		audit:  []string{"deny spawn ELIMIT", "deny spawn EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			if o.result["#depth"] != "8" {
				t.Errorf("the chain stopped at depth %s, want 8", o.result["#depth"])
			}
			e.allStopped(t)
		},
	},
	{
		name: "widen-spawn", law: lawNarrower + " for children; child clearance within the parent's",
		opts: envOptions{spec: map[string]string{"spawner": `"max_children":50`}},
		want: map[string]string{
			"web_paths": "EDENIED", "web_methods": "EDENIED", "web_origin": "EDENIED", "web_timeout": "EDENIED",
			"card_budget": "EDENIED", "card_payees": "EDENIED", "card_approval": "EDENIED",
			"data_fields": "EDENIED", "data_ops": "EDENIED", "spawner_children": "EDENIED",
			"spawner_memory": "EDENIED", "declass_drop": "EDENIED", "test_level": "EDENIED",
			"memory": "EDENIED", "timeout": "EDENIED", "module": "EDENIED", "cap_as_input": "EWRONGTYPE",
			"principal": "EINVAL", "public_child": "ESUCCESS", "public_child_wait": "ESUCCESS",
			"public_child.grandchild_clearance": "EFLOW",
		},
		audit: []string{"deny spawn EDENIED", "deny spawn EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) {
			if n := len(e.k.Graph().Tasks); n != 2 {
				t.Errorf("%d tasks started, want the attacker and its one public child", n)
			}
		},
	},
}

func TestAttacks(t *testing.T) {
	all := append(append(append(append([]attack(nil), attacks...), flowAttacks...), payAttacks...), limitAttacks...)
	// Rows spend most of their time waiting (timeouts, fsyncs of the audit
	// log, servers), so they run more at a time than -parallel (GOMAXPROCS)
	// would allow: t.Run may be called from several goroutines at once.
	sem := make(chan struct{}, max(8, 2*runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.Run(a.name, func(t *testing.T) { runAttack(t, a) })
		}()
	}
	wg.Wait()
}

// hugeTable is the initial size the second table bomb declares: 2^26
// funcref elements, half a GiB of host memory if instantiated.
const hugeTable = 1 << 26

// foreignWant: the child tries each of the parent's seven capabilities
// three ways and its blob once; the parent tries the child's blob.
func foreignWant() map[string]string {
	w := map[string]string{
		"spawn": "ESUCCESS", "wait": "ESUCCESS",
		"child.read_blob": "EBADHANDLE", "parent_reads_child_blob": "EBADHANDLE",
	}
	for _, n := range []string{"web", "vault", "mydata", "card", "spawner", "declass", "test"} {
		for _, op := range []string{"call", "derive", "revoke"} {
			w["child."+op+"_"+n] = "EBADHANDLE"
		}
	}
	return w
}

// onlyPaths asserts the granted server received exactly one request for
// each of paths (in any order) and nothing else.
func (e *env) onlyPaths(t *testing.T, paths ...string) {
	t.Helper()
	want := map[string]int{}
	for _, p := range paths {
		want[p]++
	}
	got := map[string]int{}
	for _, s := range e.granted.Requests() {
		got[s.Path]++
	}
	for p, n := range got {
		if want[p] != n {
			t.Errorf("the granted server saw %s %d times, want %d", p, n, want[p])
		}
	}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("the granted server saw %s %d times, want %d", p, got[p], n)
		}
	}
}

// allStopped asserts no task of the attack is still running, once they
// have had time to stop (a minute: a wait for an event, bounded).
func (e *env) allStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		running := 0
		for _, gt := range e.k.Graph().Tasks {
			if gt.State == kernel.TaskRunning {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d tasks still running after the attack", running)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flowAttacks are the exfiltration and laundering rows.
var flowAttacks = []attack{
	{
		name: "origin-confusion", law: lawScope + "; redirects followed only in scope",
		want: map[string]string{
			"evil_absolute": "EDENIED", "userinfo": "EDENIED", "userinfo_same": "EDENIED", "evil_port": "EDENIED",
			"default_port": "EDENIED", "suffix_host": "EDENIED", "prefix_host": "EDENIED", "subdomain": "EDENIED",
			"idna_lookalike": "EDENIED", "punycode": "EDENIED", "ip_literal": "EDENIED", "network_path": "EDENIED",
			"backslash_authority": "EDENIED", "https_scheme": "EDENIED", "case": "ESUCCESS", "trailing_dot": "ESUCCESS",
			"dotdot": "EDENIED", "dotdot_encoded": "EDENIED", "dotdot_mixed": "EDENIED", "encoded_slash": "EDENIED",
			"dotdot_semicolon": "EDENIED", "no_boundary": "EDENIED", "redirect_evil": "EDENIED",
			"redirect_evil_userinfo": "EDENIED", "redirect_protocol_relative": "EDENIED",
			"redirect_out_of_paths": "EDENIED", "redirect_dotdot": "EDENIED", "redirect_loop": "ELIMIT",
			"redirect_in_scope": "ESUCCESS",
		},
		audit: []string{"deny call:fetch EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			for _, s := range e.granted.Requests() {
				if !strings.HasPrefix(s.Path, "/api/") && s.Path != "/api" {
					t.Errorf("the granted server saw a path out of scope: %s", s)
				}
			}
			if o.result["#case"] != "ok GET /api/case" || o.result["#trailing_dot"] != "ok GET /api/dot" {
				t.Errorf("same-origin spellings: %q %q", o.result["#case"], o.result["#trailing_dot"])
			}
		},
	},
	{
		name: "exfil-url", law: lawSink,
		want: map[string]string{
			"read_unread": "ESUCCESS", "splice_path": "EFLOW", "splice_absolute": "EFLOW",
			"clean_before_read": "ESUCCESS", "read": "ESUCCESS", "path": "EFLOW", "absolute": "EFLOW",
			// The scope is decided before the flow (docs/ARCHITECTURE.md, "the mediation pipeline"): a
			// URL the capability cannot reach is EDENIED, tainted or not.
			"absolute_evil": "EDENIED", "clean_after_read": "EFLOW", "vault": "ESUCCESS",
		},
		audit: []string{"deny call:fetch EFLOW", "allow call:fetch ESUCCESS"},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/api/clean-before", "/vault/"+alicePassport)
		},
	},
	{
		name: "exfil-query", law: lawSink,
		want: map[string]string{
			"read_unread": "ESUCCESS", "splice_query": "EFLOW", "splice_query_name": "EFLOW", "read": "ESUCCESS",
			"query": "EFLOW", "query_name": "EFLOW", "fragment": "EFLOW", "absolute_query": "EFLOW",
		},
		audit: []string{"deny call:fetch EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "exfil-header", law: lawSink + "; injected headers reserved",
		want: map[string]string{
			"read_unread": "ESUCCESS", "splice_header": "EFLOW", "set_authorization": "EDENIED", "read": "ESUCCESS",
			"header_value": "EFLOW", "header_name": "EFLOW", "user_agent": "EFLOW", "cookie": "EDENIED",
		},
		audit: []string{"deny call:fetch EFLOW", "deny call:fetch EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "exfil-body", law: lawSink + " (task label and every blob sent by handle)",
		want: map[string]string{
			"read_unread": "ESUCCESS", "body_blob": "EFLOW", "splice_body": "EFLOW", "vault_body_blob": "ESUCCESS",
			"read": "ESUCCESS", "body_inline": "EFLOW", "body_json": "EFLOW", "new_blob": "ESUCCESS", "body_new_blob": "EFLOW",
		},
		audit: []string{"deny call:fetch EFLOW", "allow call:fetch ESUCCESS"},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/vault/store")
			for _, s := range e.granted.Requests() {
				if s.Path == "/vault/store" && !strings.Contains(string(s.Body), alicePassport) {
					t.Errorf("the vault did not get the passport by handle: %s", s)
				}
			}
		},
	},
	{
		name: "exfil-subdomain", law: lawSink + "; " + lawScope,
		want: map[string]string{
			// Another origin is out of scope, decided before the flow.
			"read_unread": "ESUCCESS", "splice_subdomain": "EDENIED", "subdomain_clean": "EDENIED",
			"read": "ESUCCESS", "subdomain_granted": "EDENIED", "subdomain_evil": "EDENIED",
		},
		audit: []string{"deny call:fetch EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "exfil-redirect", law: lawSink + "; redirects followed only in scope",
		want: map[string]string{
			"redirect_evil": "EDENIED", "redirect_evil_post": "EDENIED", "read_unread": "ESUCCESS",
			"splice_redirect": "EFLOW", "vault_307_evil": "EDENIED", "vault_redirect_public_path": "EDENIED",
			"redirect_after_read": "EFLOW",
		},
		audit: []string{"deny call:fetch EFLOW", "deny call:fetch EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/api/redirect", "/api/redirect", "/vault/redirect", "/vault/redirect")
		},
	},
	{
		name: "exfil-child", law: lawSink + " in children; a child starts at its parent's label (law 6)",
		want: map[string]string{
			"read_unread": "ESUCCESS", "passport_to_public_child": "EFLOW", "spawn_after_read": "ESUCCESS",
			"wait": "ESUCCESS", "child.fetch": "EFLOW", "public_child_after_read": "EFLOW",
		},
		audit: []string{"deny spawn EFLOW", "deny call:fetch EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "exfil-result", law: lawLabels + " (a child's result carries its label); " + lawSink,
		want: map[string]string{
			"spawn": "ESUCCESS", "wait": "ESUCCESS", "result_as_body": "EFLOW", "result_spliced": "EFLOW",
			"clean_before_read": "ESUCCESS", "read_result": "ESUCCESS", "result_inline": "EFLOW",
		},
		audit: []string{"deny call:fetch EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t, "/api/before-reading-result") },
	},
	{
		name: "launder-blob", law: lawLabels + " (what a task writes carries its label)",
		want: map[string]string{
			"read": "ESUCCESS", "copy": "EFLOW", "echo_call": "ESUCCESS", "kind_echo": "EFLOW",
			"describe_wrap": "EFLOW", "early_blob": "EFLOW", "after_drop": "EFLOW",
		},
		audit: []string{"deny call:fetch EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "launder-splice", law: lawLabels + " (a result carries the labels of the blobs spliced into the call)",
		want: map[string]string{
			"kind_splice": "ESUCCESS", "send_kind_copy": "EFLOW", "vault_echo": "ESUCCESS", "send_echo_copy": "EFLOW",
		},
		audit: []string{"deny call:fetch EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t, "/vault/echo") },
	},
	{
		name: "launder-child", law: lawLabels + " (a child starts at its parent's label, cleared above it)",
		want: map[string]string{
			"public_child": "EFLOW", "other_clearance_child": "EFLOW", "tainted_child": "ESUCCESS", "wait": "ESUCCESS",
			"child.fetch": "EFLOW", "child.fresh_blob": "EFLOW",
		},
		audit: []string{"deny spawn EFLOW", "deny call:fetch EFLOW"},
		check: func(t *testing.T, e *env, o *outcome) { e.onlyPaths(t) },
	},
	{
		name: "launder-datawrite", law: lawLabels + " (a write carries the writer's label)",
		want: map[string]string{"read": "ESUCCESS", "write_passport_into_plan": "EFLOW"},
	},
	{
		name: "declassify-misuse", law: lawDeclassify,
		want: map[string]string{
			"declassify_plan": "ESUCCESS", "send_declassified": "ESUCCESS", "declassify_financial": "ESUCCESS",
			"send_financial": "EFLOW", "derive_more_drop": "EDENIED", "derive_project_passport": "EDENIED",
			"derive_project_parent": "EDENIED", "declassify_garbage": "EINVAL", "declassify_cap": "EWRONGTYPE",
			"declassify_after_read": "ESUCCESS", "send_after_read": "EFLOW", "#read_passport": "true",
		},
		audit: []string{"allow call:declassify ESUCCESS", "deny call:fetch EFLOW", "deny derive EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/api/declassified")
			for _, s := range e.granted.Requests() {
				if s.Path == "/api/declassified" && !strings.Contains(string(s.Body), "gold") {
					t.Errorf("the declassified plan did not arrive: %s", s)
				}
			}
			if n := o.count("allow", "call:declassify", ""); n < 3 {
				t.Errorf("%d declassifications audited, want every use", n)
			}
		},
	},
	{
		name: "read-other", law: lawPrincipal,
		want: map[string]string{
			"bob_by_id": "EDENIED", "nobody_by_id": "EDENIED", "bob_by_owner": "EDENIED",
			"query_bobs_plan": "ESUCCESS", "query_all": "ESUCCESS", "query_passport": "ESUCCESS",
			"write_bob": "EDENIED", "derive_owners_bob": "ESUCCESS", "read_via_owners_bob": "EDENIED",
			"derive_relation": "EDENIED", "derive_ids_bob": "ESUCCESS", "read_via_ids_bob": "EDENIED",
			"derive_other_collection": "EDENIED", "spawn_as_bob": "EINVAL",
			"#same_error": "true", "#queries_saw_bob": "false",
		},
		audit: []string{"deny call:read EDENIED", "deny derive EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			for _, k := range []string{"#same_error", "#queries_saw_bob"} {
				if o.result[k] != o.want(k) {
					t.Errorf("%s = %s", k, o.result[k])
				}
			}
			if strings.Contains(string(o.raw), bobPassport) || strings.Contains(string(o.raw), "silver") {
				t.Errorf("Bob's data reached Alice's task: %s", o.raw)
			}
		},
	},
}

// payAttacks are the payment rows.
var payAttacks = []attack{
	{
		name: "payee-confusion", law: lawPayScope,
		want: map[string]string{
			"suffix": "EDENIED", "prefix": "EDENIED", "trailing_dot": "EDENIED", "path": "EINVAL",
			"userinfo": "EINVAL", "homoglyph": "EINVAL", "punycode": "EDENIED", "space": "EINVAL",
			"nul": "EINVAL", "newline": "EINVAL", "empty": "EINVAL", "wildcard": "EINVAL", "upper": "ESUCCESS",
			"currency_space": "EINVAL", "currency_other": "EDENIED",
		},
		audit: []string{"deny call:charge EDENIED", "allow call:charge ESUCCESS"},
		check: func(t *testing.T, e *env, o *outcome) {
			if total, n := e.providerTotal(); n != 1 || total != 100 {
				t.Errorf("the provider has %d charges totalling %d, want the one upper-case charge of 1.00", n, total)
			}
		},
	},
	{
		name: "double-spend", law: lawBudget + "; idempotency keys across the tree",
		want: map[string]string{
			"first": "ESUCCESS", "replay": "ESUCCESS", "replay_other_amount": "EDENIED",
			"replay_through_child": "ESUCCESS", "until_refused": "ELIMIT",
			"#same_receipt": "true", "#child_same_receipt": "true", "#more_charges": "4",
		},
		audit: []string{"deny call:charge ELIMIT", "deny call:charge EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			if total, n := e.providerTotal(); n != 5 || total != 25000 {
				t.Errorf("the provider has %d charges totalling %d, want 5 totalling 25000", n, total)
			}
			for _, k := range []string{"#same_receipt", "#child_same_receipt", "#more_charges"} {
				if o.result[k] != o.want(k) {
					t.Errorf("%s = %s", k, o.result[k])
				}
			}
		},
	},
	{
		name: "split-spend", law: lawBudget,
		want: map[string]string{
			"whole": "EDENIED", "first_80": "ESUCCESS", "second_80": "ESUCCESS",
			// Each child may have the whole budget; they share it.
			"derive_0": "ESUCCESS", "derive_1": "ESUCCESS", "derive_2": "ESUCCESS",
			"kids_80": "ELIMIT", "cents": "ELIMIT", "#kids_80_ok": "1", "#cents_ok": "7",
		},
		audit: []string{"deny call:charge ELIMIT", "deny call:charge EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			// 3 x 80.00 (the budget) then 7 cents (the uses).
			if total, n := e.providerTotal(); n != 10 || total != 24007 {
				t.Errorf("the provider has %d charges totalling %d, want 10 totalling 24007", n, total)
			}
			for _, k := range []string{"#kids_80_ok", "#cents_ok"} {
				if o.result[k] != o.want(k) {
					t.Errorf("%s = %s", k, o.result[k])
				}
			}
		},
	},
	{
		name: "racing-children", law: lawBudget + " (atomic on every ancestor's ledger)",
		limits: kernel.Limits{Timeout: hangGuard},
		want: map[string]string{
			"spawn_0": "ESUCCESS", "spawn_1": "ESUCCESS", "spawn_2": "ESUCCESS", "spawn_3": "ESUCCESS",
			"wait_0": "ESUCCESS", "wait_1": "ESUCCESS", "wait_2": "ESUCCESS", "wait_3": "ESUCCESS",
			"child_stop": "ELIMIT", "#keyed_ok": "4", "#unkeyed_ok": "2",
		},
		audit: []string{"deny call:charge ELIMIT"},
		check: func(t *testing.T, e *env, o *outcome) {
			if total, n := e.providerTotal(); n != 3 || total != 24000 {
				t.Errorf("the provider has %d charges totalling %d, want 3 totalling 24000", n, total)
			}
			for _, k := range []string{"#keyed_ok", "#unkeyed_ok"} {
				if o.result[k] != o.want(k) {
					t.Errorf("%s = %s", k, o.result[k])
				}
			}
		},
	},
	{
		name: "approval-bypass", law: lawApproval + "; every ancestor's constraints apply",
		want: map[string]string{
			"charge_above": "EAPPROVAL", "charge_replay": "EAPPROVAL", "derive_raise_threshold": "EDENIED",
			"charge_lowered_threshold": "EAPPROVAL", "derive_when_true": "ESUCCESS", "charge_via_when_true": "EAPPROVAL",
			"spawn": "ESUCCESS", "child.charge": "EAPPROVAL", "post": "EAPPROVAL", "post_lower": "EAPPROVAL",
			"post_mixed": "EAPPROVAL", "get_override": "EDENIED", "derive_approve_false": "ESUCCESS",
			"post_via_false": "EAPPROVAL", "derive_get_only": "ESUCCESS",
			// The kind's scope is checked first (kernel.Prechecker): the
			// person is never asked about a POST the copy cannot make.
			"post_via_get_only":     "EDENIED",
			"get_needs_no_approval": "ESUCCESS",
		},
		audit: []string{"deny approve:charge EAPPROVAL", "deny approve:fetch EAPPROVAL"},
		check: func(t *testing.T, e *env, o *outcome) {
			if _, n := e.providerTotal(); n != 0 || e.provider.Requests() != 0 {
				t.Errorf("the provider saw %d charges", n)
			}
			e.onlyPaths(t, "/api/transfer")
			for _, s := range e.granted.Requests() {
				if s.Method != "GET" {
					t.Errorf("a %s reached the server without approval", s.Method)
				}
			}
			if n := e.approvals.Load(); n < 8 {
				t.Errorf("the approver was asked %d times", n)
			}
		},
	},
	{
		// The 556-byte reproduction: a remembered yes (approve_mints) is
		// bound to the whole effect, not to the 512 bytes shown.
		name: "approval-mints", law: lawApproval + "; a yes holds only for the effect's digest",
		opts: envOptions{mints: []string{"transfer"}, approve: func(r kernel.ApprovalRequest) bool {
			for _, d := range r.Details {
				if d.Name == "body" {
					return strings.HasSuffix(d.Value, `"amount":10}`) || strings.HasSuffix(d.Value, `"amount":11}`)
				}
			}
			return false
		}},
		want: map[string]string{
			"approved": "ESUCCESS", "same_again": "ESUCCESS",
			"same_prefix_inline": "EAPPROVAL", "same_prefix_blob": "EAPPROVAL",
			"blob_approved": "ESUCCESS", "blob_again": "ESUCCESS", "blob_other_contents": "EAPPROVAL",
		},
		audit: []string{"deny approve:fetch EAPPROVAL", "allow approve:fetch ESUCCESS"},
		check: func(t *testing.T, e *env, o *outcome) {
			var got []string
			for _, r := range e.granted.Requests() {
				if len(r.Body) != 556 {
					t.Errorf("a body of %d bytes reached the server", len(r.Body))
				}
				got = append(got, string(r.Body[len(r.Body)-3:]))
			}
			if want := []string{"10}", "10}", "11}", "11}"}; !slices.Equal(got, want) {
				t.Errorf("the server received bodies ending %q, want %q (only what the person approved)", got, want)
			}
			// Asked: the first 10, both 99s, the first 11, the 98.
			if n := e.approvals.Load(); n != 5 {
				t.Errorf("the approver was asked %d times, want 5", n)
			}
			// Audited: two yeses with their channel, two remembered, three
			// refusals.
			var asked, remembered, refused int
			for _, en := range o.entries {
				switch {
				case en.Op != "approve:fetch":
				case en.Decision == "allow" && strings.Contains(en.Reason, "answered: yes, by channel program"):
					asked++
				case en.Decision == "allow" && strings.Contains(en.Reason, "approved before in this task"):
					remembered++
				case en.Decision == "deny" && strings.Contains(en.Reason, "answered: no, by channel program"):
					refused++
				}
			}
			if asked != 2 || remembered != 2 || refused != 3 {
				t.Errorf("audited %d yeses, %d remembered, %d refusals; want 2, 2, 3", asked, remembered, refused)
			}
		},
	},
	{
		name: "use-after-revoke", law: lawRevoke,
		limits: kernel.Limits{Timeout: hangGuard},
		want: map[string]string{
			"spawn": "ESUCCESS", "revoke": "ESUCCESS", "revoked_call": "EREVOKED", "descendant_call": "EREVOKED",
			"derive_from_revoked": "EREVOKED", "pass_revoked": "EREVOKED", "revoke_again": "ESUCCESS",
			"wait": "ESUCCESS", "child.stop": "EREVOKED", "root_after": "ESUCCESS", "revoke_root": "ESUCCESS",
			"root_relookup": "EREVOKED", "revoke_spawner": "ESUCCESS", "spawn_revoked": "EREVOKED",
		},
		audit: []string{"deny call:fetch EREVOKED", "deny derive EREVOKED", "deny spawn EREVOKED", "deny call:charge EREVOKED"},
		check: func(t *testing.T, e *env, o *outcome) {
			for _, s := range e.granted.Requests() {
				if s.Path == "/api/after-revoke" {
					t.Errorf("a request after the revocation reached the server")
				}
			}
			if _, n := e.providerTotal(); n != 0 {
				t.Errorf("the provider saw %d charges", n)
			}
		},
	},
	{
		name: "use-after-expiry", law: "caps/pay expiry checked at every use; " + lawNarrower,
		want: map[string]string{
			// Deriving from (or passing) an expired capability is allowed;
			// the copy is as expired as its parent.
			"expired_charge": "EEXPIRED", "expired_again": "EEXPIRED", "derive_expired": "ESUCCESS",
			"derived_charge": "EEXPIRED", "extend_expired": "EDENIED", "spawn_with_expired": "ESUCCESS",
			"child.charge":       "EEXPIRED",
			"derive_past_expiry": "ESUCCESS", "charge_past_expiry": "EEXPIRED",
			"derive_outlive_parent": "EDENIED", "derive_outlive_duration": "EDENIED",
		},
		audit: []string{"deny call:charge EEXPIRED"},
		check: func(t *testing.T, e *env, o *outcome) {
			if _, n := e.providerTotal(); n != 0 || e.provider.Requests() != 0 {
				t.Errorf("the provider saw %d charges", n)
			}
		},
	},
	{
		name: "widen-derive", law: lawNarrower,
		want: map[string]string{
			"net_paths": "EDENIED", "net_paths_sibling": "EDENIED", "net_methods": "EDENIED", "net_origin": "EDENIED",
			"net_request_bytes": "EDENIED", "net_response_bytes": "EDENIED", "net_timeout": "EDENIED",
			"net_redirects": "EDENIED", "net_clearance": "EDENIED", "pay_budget": "EDENIED", "pay_payees": "EDENIED",
			"pay_max": "EDENIED", "pay_uses": "EDENIED", "pay_approval": "EDENIED", "pay_currency": "EDENIED",
			"data_fields": "EDENIED", "data_all_fields": "EDENIED", "data_ops": "EDENIED", "data_collection": "EDENIED",
			"data_records": "EDENIED", "spawn_modules": "EDENIED", "spawn_depth": "EDENIED", "spawn_children": "EDENIED",
			"spawn_memory": "EDENIED", "declass_drop": "EDENIED", "declass_project": "EDENIED", "test_level": "EDENIED",
			"rewiden_paths": "EDENIED", "rewiden_methods": "EDENIED", "rewiden_budget": "EDENIED", "legal": "ESUCCESS",
		},
		audit: []string{"deny derive EDENIED"},
		check: func(t *testing.T, e *env, o *outcome) {
			if n := o.count("deny", "derive", "EDENIED"); n < 30 {
				t.Errorf("%d refused derivations audited, want 30", n)
			}
		},
	},
}

// limitAttacks are the rows for the per-task blob bytes and the
// per-capability rate.
var limitAttacks = []attack{
	{
		name: "blob-hoard", law: lawBounded + " (Limits.MaxBlobBytes)",
		limits: kernel.Limits{MaxBlobBytes: 8<<20 + 4096},
		want:   map[string]string{"stopped_by": "ELIMIT", "call_result_over": "ELIMIT", "after_drop": "ESUCCESS", "#held_mib": "8"},
		check: func(t *testing.T, e *env, o *outcome) {
			if o.result["#held_mib"] != "8" {
				t.Errorf("the task held %s MiB of blobs, want 8", o.result["#held_mib"])
			}
		},
	},
	{
		name: "request-flood", law: lawBounded + " (GrantSpec.Rate, shared by derived capabilities)",
		rate: kernel.Rate{N: 20, Per: time.Hour},
		want: map[string]string{
			"root": "ELIMIT", "derive": "ESUCCESS", "derived": "ELIMIT", "spawn": "ESUCCESS", "wait": "ESUCCESS",
			"child.stop": "ELIMIT", "#root_ok": "20", "#derived_ok": "0", "#child_ok": "0",
		},
		audit: []string{"deny call:fetch ELIMIT"},
		check: func(t *testing.T, e *env, o *outcome) {
			for _, k := range []string{"#root_ok", "#derived_ok", "#child_ok"} {
				if o.result[k] != o.want(k) {
					t.Errorf("%s = %s, want %s", k, o.result[k], o.want(k))
				}
			}
			n := 0
			for _, s := range e.granted.Requests() {
				if s.Path == "/api/flood" {
					n++
				}
			}
			if n != 20 {
				t.Errorf("the server saw %d requests through a capability limited to 20/h", n)
			}
		},
	},
}
