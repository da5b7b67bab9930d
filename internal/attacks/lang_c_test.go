package attacks_test

import (
	"context"
	"os"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
)

// cAttacks are the raw-pointer rows with guests written in C
// (testdata/attacks/*-c, built by guestbuild against guest-sdk/c): the
// same attempts as their Go rows, through the header's raw imports with
// plain integers, plus what C makes easy to get wrong (negative lengths,
// lengths computed backwards, out pointers at the real end of memory, at
// address 0 and into string literals, NULL through the wrappers).
var cAttacks = []attack{
	{
		name: "oob-pointers-c", law: lawBounded + " (EFAULT before any effect; C guest)",
		want: map[string]string{
			"lookup_name_oob": "EFAULT", "lookup_out_oob": "EFAULT", "call_op_oob": "EFAULT",
			"call_args_oob": "EFAULT", "fetch_out_oob": "EFAULT", "fetch_out_unaligned_end": "EFAULT",
			"charge_out_oob": "EFAULT", "derive_out_oob": "EFAULT", "spawn_out_oob": "EFAULT",
			"spawn_req_oob": "EFAULT", "describe_out_oob": "EFAULT", "input_out_oob": "EFAULT",
			"blob_create_oob": "EFAULT", "blob_read_buf_oob": "EFAULT", "blob_read_out_oob": "EFAULT",
			"blob_len_out_oob": "EFAULT", "last_error_oob": "EFAULT", "wait_out_oob": "EFAULT",
			// At the real end of memory: a word that does not fit is
			// refused, the last whole word is written.
			"fetch_out_straddles_end": "EFAULT", "fetch_out_at_end": "EFAULT",
			"derive_req_straddles_end": "EFAULT", "blob_read_buf_straddles_end": "EFAULT",
			"blob_len_out_last_byte": "EFAULT", "lookup_out_last_word": "ESUCCESS", "#last_word_is_web": "true",
			// WebAssembly has no read-only memory: a string literal and
			// address 0 are the guest's own bytes, written as asked.
			"blob_len_out_literal": "ESUCCESS", "#literal_overwritten": "true", "blob_len_out_null": "ESUCCESS",
			// The header's wrappers refuse NULL themselves.
			"wrapper_null_out": "EFAULT", "wrapper_null_args": "EFAULT", "wrapper_null_op": "EFAULT",
			"wrapper_null_req": "EFAULT",
			"fetch_ok":         "ESUCCESS",
		},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t, "/api/oob-effect") // once: the good call
			for _, k := range []string{"#last_word_is_web", "#literal_overwritten"} {
				if o.result[k] != "true" {
					t.Errorf("%s = %q, want true", k, o.result[k])
				}
			}
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
		name: "length-overflow-c", law: lawBounded + " (limits before ranges, 64-bit arithmetic; C guest)",
		want: map[string]string{
			"lookup_len_wrap": "ELIMIT", "lookup_len_limit": "ELIMIT", "lookup_len_negative": "ELIMIT",
			"op_len_wrap": "EINVAL", "op_len_limit": "EINVAL", "op_len_negative": "EINVAL",
			"args_len_wrap": "ELIMIT", "args_len_4g": "ELIMIT", "args_len_negative": "ELIMIT",
			"args_len_backwards": "ELIMIT", "args_len_limit": "ELIMIT",
			"derive_len_wrap": "ELIMIT", "derive_len_negative": "ELIMIT",
			"blob_create_wrap": "EFAULT", "blob_create_limit": "ELIMIT", "blob_create_negative": "ELIMIT",
			"blob_create_past_end": "EFAULT", "blob_create_to_end": "ESUCCESS",
			"read_buf_wrap": "EFAULT", "read_buf_negative": "EFAULT",
			"read_offset_past_end": "EINVAL", "read_offset_4g": "EINVAL", "read_offset_negative": "EINVAL",
			"last_error_wrap": "EFAULT", "last_error_negative": "EFAULT",
			"spawn_len_wrap": "ELIMIT", "spawn_len_negative": "ELIMIT",
			"read_ok": "ESUCCESS", "#read": "world",
		},
		check: func(t *testing.T, e *env, o *outcome) {
			e.onlyPaths(t)
			if o.result["#read"] != "world" {
				t.Errorf("read %q", o.result["#read"])
			}
			if g := e.k.Graph(); len(g.Tasks) != 1 {
				t.Errorf("%d tasks in the graph, want the attacker alone", len(g.Tasks))
			}
		},
	},
}

// TestAttacksC runs the C rows. It skips when the C toolchain is missing,
// except on CI (CI=true), which installs it.
func TestAttacksC(t *testing.T) {
	if _, err := guestbuild.CToolchain(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but: %v", err)
		}
		t.Skipf("skipping the C attack guests: %v", err)
	}
	for _, a := range cAttacks {
		if _, ok := guests[a.name]; !ok {
			t.Fatalf("guest %s was not built (testdata/attacks/%s)", a.name, a.name)
		}
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			runAttack(t, a)
		})
	}
}
