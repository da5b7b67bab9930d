// Command mcp-attacker is a malicious guest holding mcp capabilities (a
// client of one upstream MCP server, caps/mcp) and a net capability. Its
// input lists attacks:
//
//	{"attacks":["baseline","name_upper",...]}
//
// It performs each in order and returns a JSON map from result key (the
// attack, or "attack.step" for attacks with several steps) to {"errno",
// "body", "detail"}: body is what it read of a result (the text of its
// first content item, decoded), detail the kernel's reason for a refusal
// or what the attack observed. Everything it reads is also printed to
// stdout, decoded, so the host can check that the injected secret never
// reached the guest in any form.
//
// The grants it expects (see caps/mcp/guest_test.go), all on one loopback
// upstream with an injected Authorization header:
//
//	files  tools read_file; when path starts with /public/ and has no "..";
//	       max_request_bytes 1024, timeout 30s, clearance public
//	naive  tools read_file; when path starts with /public/ (only)
//	multi  tools read_file, list_*, whoami*; list_secret unpinned,
//	       list_rug pinned to another definition
//	vault  tools read_secret; results labelled pii:alice; clearance pii:alice
//	share  tools send; clearance pii:alice
//	ledger tools read_secret; only structuredContent.ssn labelled pii:alice
//	web    a net capability (the wrong kind)
package main

import (
	"encoding/json"
	"fmt"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

type res struct {
	Errno  string `json:"errno"`
	Body   string `json:"body,omitempty"`
	Detail string `json:"detail,omitempty"`
}

var (
	out = map[string]res{}

	files, naive, multi, vault, share, ledger, web mandate.Cap

	// secretBlob is vault's read_secret result, never read (but by
	// flow_tainted_self).
	secretBlob mandate.Blob
)

func errno(err error) string { return mandate.ErrnoOf(err).String() }

func reason(err error) string {
	if e, ok := err.(*mandate.Error); ok {
		return e.Reason
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// rec records err under key (with the kernel's reason).
func rec(key string, err error) {
	out[key] = res{Errno: errno(err), Detail: reason(err)}
	fmt.Printf("%s: %s %s\n", key, errno(err), reason(err))
}

// callReq is an abi.MCPCallRequest whose arguments are written raw, so
// an attack can send what encoding/json would not write (duplicate keys).
func callReq(tool, args string, splice []abi.Handle, parts []abi.SplicePart) []byte {
	r := abi.MCPCallRequest{Tool: tool, Splice: splice, SpliceParts: parts}
	if args != "" {
		r.Arguments = json.RawMessage(args)
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return b
}

// text is the decoded text of a CallToolResult's first content item.
func text(b []byte) string {
	var r abi.MCPCallResult
	if err := json.Unmarshal(b, &r); err != nil || len(r.Content) == 0 {
		return string(b)
	}
	var c struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(r.Content[0], &c); err != nil {
		return string(r.Content[0])
	}
	return c.Text
}

// read reads a result blob and records what it holds under key.
func read(key string, b mandate.Blob) {
	data, err := b.Bytes()
	if err != nil {
		rec(key, err)
		return
	}
	t := text(data)
	// The structured content, decoded: its strings as the guest reads
	// them (fmt writes them unescaped).
	var r struct {
		StructuredContent any `json:"structuredContent"`
	}
	_ = json.Unmarshal(data, &r)
	var sc string
	if r.StructuredContent != nil {
		sc = fmt.Sprint(r.StructuredContent)
	}
	out[key] = res{Errno: "ESUCCESS", Body: t, Detail: sc}
	fmt.Printf("%s: ESUCCESS body %s\n%s: structured %s\n%s: raw %s\n", key, t, key, sc, key, data)
}

// raw performs a call with an argument document and records it.
func raw(key string, c mandate.Cap, op string, args []byte) (mandate.Blob, error) {
	b, err := c.Call(op, args)
	if err != nil {
		rec(key, err)
		return b, err
	}
	read(key, b)
	return b, nil
}

// unread performs a call and records its errno without reading the
// result (a result carries the labels of what was spliced into the call).
func unread(key string, c mandate.Cap, tool, args string, splice []abi.Handle, parts []abi.SplicePart) {
	b, err := c.Call(abi.MCPCallOp, callReq(tool, args, splice, parts))
	rec(key, err)
	if err == nil {
		n, _ := b.Len()
		out[key] = res{Errno: "ESUCCESS", Detail: fmt.Sprintf("%d bytes unread", n)}
	}
}

// call calls tool on c with args (raw JSON).
func call(key string, c mandate.Cap, tool, args string) (mandate.Blob, error) {
	return raw(key, c, abi.MCPCallOp, callReq(tool, args, nil, nil))
}

// spliced calls tool on c with args and the blobs spliced.
func spliced(key string, c mandate.Cap, tool, args string, splice []abi.Handle, parts []abi.SplicePart) {
	raw(key, c, abi.MCPCallOp, callReq(tool, args, splice, parts))
}

func newBlob(s string) mandate.Blob {
	b, err := mandate.NewBlob([]byte(s))
	if err != nil {
		panic(err)
	}
	return b
}

func derive(key string, c mandate.Cap, req string) (mandate.Cap, error) {
	d, err := c.Derive([]byte(req))
	rec(key, err)
	return d, err
}

func path(p string) string {
	b, _ := json.Marshal(map[string]string{"path": p})
	return string(b)
}

var attacks = map[string]func(){
	// 1. The baseline: an allowed call of a granted tool.
	"baseline": func() { call("baseline", files, "read_file", path("/public/a.txt")) },

	// 2. Tools the grant does not name, and names playing with patterns.
	"name_other":          func() { call("name_other", files, "delete_file", path("/public/a.txt")) },
	"name_upper":          func() { call("name_upper", files, "READ_FILE", path("/public/a.txt")) },
	"name_trailing_space": func() { call("name_trailing_space", files, "read_file ", path("/public/a.txt")) },
	"name_leading_space":  func() { call("name_leading_space", files, " read_file", path("/public/a.txt")) },
	"name_cyrillic":       func() { call("name_cyrillic", files, "read_f\u0456le", path("/public/a.txt")) },
	"name_zero_width":     func() { call("name_zero_width", files, "read\u200b_file", path("/public/a.txt")) },
	"name_nul":            func() { call("name_nul", files, "read_file\x00", path("/public/a.txt")) },
	"name_star":           func() { call("name_star", files, "*", path("/public/a.txt")) },
	"name_pattern":        func() { call("name_pattern", files, "read_*", path("/public/a.txt")) },
	"name_empty":          func() { call("name_empty", files, "", path("/public/a.txt")) },
	"name_long":           func() { call("name_long", files, strings.Repeat("r", 300), path("/public/a.txt")) },
	// "list_*" read literally is a name the pattern list_* matches; the
	// server has no such tool and it has no pin.
	"name_literal_pattern": func() { call("name_literal_pattern", multi, "list_*", path("/public")) },

	// 3. Arguments against the grant's when, and past max_request_bytes.
	"when_outside":      func() { call("when_outside", files, "read_file", path("/secret/x")) },
	"when_dotdot":       func() { call("when_dotdot", files, "read_file", path("/public/../secret/x")) },
	"when_dotdot_naive": func() { call("when_dotdot_naive", naive, "read_file", path("/public/../secret/naive")) },
	"when_missing":      func() { call("when_missing", files, "read_file", `{}`) },
	"when_no_args":      func() { call("when_no_args", files, "read_file", "") },
	"when_list":         func() { call("when_list", files, "read_file", `{"path":["/public/a.txt"]}`) },
	"when_number":       func() { call("when_number", files, "read_file", `{"path":1}`) },
	"when_case":         func() { call("when_case", files, "read_file", path("/PUBLIC/x")) },
	"when_fullwidth":    func() { call("when_fullwidth", files, "read_file", path("\uff0fpublic/x")) },
	"when_dup_key": func() {
		call("when_dup_key", files, "read_file", `{"path":"/public/a.txt","path":"/secret/dup"}`)
	},
	"when_dup_key_rev": func() {
		call("when_dup_key_rev", files, "read_file", `{"path":"/secret/dup2","path":"/public/dup2"}`)
	},
	"when_not_object": func() { call("when_not_object", files, "read_file", `["/public/a.txt"]`) },
	"when_splice": func() {
		spliced("when_splice", files, "read_file", path(abi.SplicePlaceholder(0)), []abi.Handle{newBlob("/secret/spliced").Handle()}, nil)
	},
	"when_splice_dotdot": func() {
		spliced("when_splice_dotdot", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)), []abi.Handle{newBlob("../secret/spliced").Handle()}, nil)
	},
	"when_splice_ok": func() {
		spliced("when_splice_ok", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)), []abi.Handle{newBlob("b.txt").Handle()}, nil)
	},
	"when_oversize": func() { call("when_oversize", files, "read_file", path("/public/"+strings.Repeat("x", 2000))) },
	"when_oversize_splice": func() {
		spliced("when_oversize_splice", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)),
			[]abi.Handle{newBlob(strings.Repeat("y", 2000)).Handle()}, nil)
	},
	"when_splice_many": func() {
		// 1000 bytes, each splice of 700 bytes: the arguments with their
		// splices are past the bound.
		b := newBlob(strings.Repeat("z", 700))
		spliced("when_splice_many", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)+abi.SplicePlaceholder(0)),
			[]abi.Handle{b.Handle()}, nil)
	},

	// 4. cap_derive asking for more.
	"derive_more_tools": func() { derive("derive_more_tools", files, `{"tools":["read_file","delete_file"]}`) },
	"derive_star":       func() { derive("derive_star", files, `{"tools":["*"]}`) },
	"derive_pattern":    func() { derive("derive_pattern", files, `{"tools":["read_*"]}`) },
	"derive_drop_pins":  func() { derive("derive_drop_pins", files, `{"pins":{}}`) },
	"derive_swap_pin": func() {
		derive("derive_swap_pin", files, `{"pins":{"read_file":"sha256:`+strings.Repeat("0", 64)+`"}}`)
	},
	"derive_clearance":    func() { derive("derive_clearance", files, `{"clearance":["pii:alice"]}`) },
	"derive_timeout":      func() { derive("derive_timeout", files, `{"timeout":"10m"}`) },
	"derive_timeout_max":  func() { derive("derive_timeout_max", files, `{"timeout":"1h"}`) },
	"derive_request":      func() { derive("derive_request", files, `{"max_request_bytes":4096}`) },
	"derive_results":      func() { derive("derive_results", vault, `{"results":{"read_secret":{"labels":[]}}}`) },
	"derive_vault_widen":  func() { derive("derive_vault_widen", vault, `{"tools":["read_secret","send"]}`) },
	"derive_other_server": func() { derive("derive_other_server", files, `{"url":"http://evil.example/mcp"}`) },
	"narrow": func() {
		d, err := derive("narrow.derive", multi, `{"tools":["list_dir"],"timeout":"10s"}`)
		if err != nil {
			return
		}
		call("narrow.list_dir", d, "list_dir", path("/public/narrow"))
		call("narrow.read_file", d, "read_file", path("/public/narrow"))
		_, err = d.Derive([]byte(`{"tools":["list_*"]}`))
		rec("narrow.rewiden", err)
	},
	"narrow_when": func() {
		d, err := derive("narrow_when.derive", files, `{"max_request_bytes":512}`)
		if err != nil {
			return
		}
		call("narrow_when.outside", d, "read_file", path("/secret/narrowed"))
		call("narrow_when.inside", d, "read_file", path("/public/narrowed"))
		call("narrow_when.oversize", d, "read_file", path("/public/"+strings.Repeat("x", 600)))
	},

	"revoke": func() {
		c, err := derive("revoke.child", files, `{}`)
		if err != nil {
			return
		}
		call("revoke.before", c, "read_file", path("/public/rev-before"))
		rec("revoke.revoke", c.Revoke())
		call("revoke.child_call", c, "read_file", path("/public/rev-after"))
		_, err = c.Derive([]byte(`{}`))
		rec("revoke.child_derive", err)
		// Revoking a parent revokes what was derived from it.
		p, err := derive("revoke.parent", multi, `{"tools":["list_dir"]}`)
		if err != nil {
			return
		}
		g, err := derive("revoke.grandchild", p, `{}`)
		if err != nil {
			return
		}
		rec("revoke.parent_revoke", p.Revoke())
		call("revoke.grandchild_call", g, "list_dir", path("/public/rev-after"))
		call("revoke.root_call", files, "read_file", path("/public/rev-root"))
	},

	// 5. Handles that are not the guest's, or not an mcp capability.
	"handle_forged": func() {
		call("handle_forged", mandate.CapFromHandle(abi.MakeHandle(4000, 9)), "read_file", path("/public/forged"))
	},
	"handle_zero": func() { call("handle_zero", mandate.CapFromHandle(0), "read_file", path("/public/zero")) },
	"handle_gen": func() {
		h := files.Handle()
		call("handle_gen", mandate.CapFromHandle(abi.MakeHandle(h.Index(), h.Gen()+1)), "read_file", path("/public/gen"))
	},
	"handle_stale": func() {
		d, err := files.Derive([]byte(`{}`))
		if err != nil {
			rec("handle_stale", err)
			return
		}
		if err := d.Drop(); err != nil {
			rec("handle_stale", err)
			return
		}
		call("handle_stale", d, "read_file", path("/public/stale"))
	},
	"handle_blob": func() {
		call("handle_blob", mandate.CapFromHandle(newBlob("x").Handle()), "read_file", path("/public/blob"))
	},
	"handle_wrong_kind": func() { call("handle_wrong_kind", web, "read_file", path("/public/net")) },
	"handle_wrong_op": func() {
		raw("handle_wrong_op", files, "fetch", []byte(`{"method":"GET","url":"/public/a.txt"}`))
	},
	"splice_cap": func() {
		spliced("splice_cap", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)), []abi.Handle{multi.Handle()}, nil)
	},
	"splice_forged": func() {
		spliced("splice_forged", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)), []abi.Handle{abi.MakeHandle(4000, 9)}, nil)
	},
	"splice_member_name": func() {
		spliced("splice_member_name", files, "read_file", `{"path":"/public/m","`+abi.SplicePlaceholder(0)+`":"x"}`,
			[]abi.Handle{newBlob("path").Handle()}, nil)
	},
	"splice_unused_index": func() {
		spliced("splice_unused_index", files, "read_file", path("/public/"+abi.SplicePlaceholder(3)), []abi.Handle{newBlob("a").Handle()}, nil)
	},

	// 6. Splicing blobs labelled above the upstream's clearance.
	"vault_read": func() {
		b, err := vault.Call(abi.MCPCallOp, callReq("read_secret", `{}`, nil, nil))
		rec("vault_read", err) // never read
		secretBlob = b
	},
	"flow_splice_high": func() {
		spliced("flow_splice_high", files, "read_file", path("/public/"+abi.SplicePlaceholder(0)), []abi.Handle{secretBlob.Handle()}, nil)
	},
	"flow_part_high": func() {
		spliced("flow_part_high", files, "read_file", path(abi.PartPlaceholder(0)), nil,
			[]abi.SplicePart{{Blob: secretBlob.Handle(), Path: "$.structuredContent.ssn"}})
	},
	"flow_splice_high_multi": func() {
		spliced("flow_splice_high_multi", multi, "list_dir", path("/public/"+abi.SplicePlaceholder(0)), []abi.Handle{secretBlob.Handle()}, nil)
	},
	"flow_share": func() {
		unread("flow_share", share, "send", `{"to":"hr","body":"`+abi.SplicePlaceholder(0)+`"}`, []abi.Handle{secretBlob.Handle()}, nil)
	},
	"flow_share_part": func() {
		unread("flow_share_part", share, "send", `{"to":"hr","body":"`+abi.PartPlaceholder(0)+`"}`, nil,
			[]abi.SplicePart{{Blob: secretBlob.Handle(), Path: "$.structuredContent.ssn"}})
	},
	// A child cleared lower refuses what its parent would take.
	"narrow_clearance": func() {
		d, err := derive("narrow_clearance.derive", share, `{"clearance":[]}`)
		if err != nil {
			return
		}
		unread("narrow_clearance.send", d, "send", `{"to":"hr","body":"`+abi.SplicePlaceholder(0)+`"}`, []abi.Handle{secretBlob.Handle()}, nil)
		_, err = d.Derive([]byte(`{"clearance":["pii:alice"]}`))
		rec("narrow_clearance.rewiden", err)
	},
	// The guest has read upstream results (tainted mcp:...): a child that
	// refuses untrusted data refuses it.
	"narrow_untrusted": func() {
		d, err := derive("narrow_untrusted.derive", files, `{"accepts_untrusted":false}`)
		if err != nil {
			return
		}
		call("narrow_untrusted.call", d, "read_file", path("/public/untrusted"))
		_, err = d.Derive([]byte(`{"accepts_untrusted":true}`))
		rec("narrow_untrusted.rewiden", err)
	},
	// ledger labels only the result's structuredContent.ssn pii:alice;
	// the server mirrors its structured content in a text item (as MCP
	// servers should), which the guest passes on instead.
	"field_mirror": func() {
		b, err := ledger.Call(abi.MCPCallOp, callReq("read_secret", `{}`, nil, nil))
		rec("field_mirror.read", err)
		if err != nil {
			return
		}
		spliced("field_mirror.field", files, "read_file", path(abi.PartPlaceholder(0)), nil,
			[]abi.SplicePart{{Blob: b.Handle(), Path: "$.structuredContent.ssn"}})
		spliced("field_mirror.text", multi, "list_dir", path(abi.PartPlaceholder(0)), nil,
			[]abi.SplicePart{{Blob: b.Handle(), Path: "$.content[0].text"}})
	},
	// Having passed the secret on without reading it (nor the results of
	// the calls it went into, which carry its label), the guest is not
	// tainted by it: a public sink still takes its calls.
	"flow_after": func() { call("flow_after", files, "read_file", path("/public/after.txt")) },

	// 7. The injected Authorization header.
	"hdr_reflect":        func() { call("hdr_reflect", multi, "whoami", `{}`) },
	"hdr_reflect_struct": func() { call("hdr_reflect_struct", multi, "whoami_struct", `{}`) },
	"hdr_reflect_error":  func() { call("hdr_reflect_error", multi, "whoami_error", `{}`) },
	"hdr_reflect_rpc":    func() { call("hdr_reflect_rpc", multi, "whoami_rpc", `{}`) },
	"hdr_after":          func() { call("hdr_after", files, "read_file", path("/public/hdr-after")) },
	"hdr_describe": func() {
		var all []string
		for _, c := range []mandate.Cap{files, naive, multi, vault, share} {
			d, err := c.Describe()
			if err != nil {
				rec("hdr_describe", err)
				return
			}
			fmt.Printf("hdr_describe: %s\n", d)
			all = append(all, string(d))
		}
		out["hdr_describe"] = res{Errno: "ESUCCESS", Detail: strings.Join(all, "\n")}
	},

	// 8. The tools op shows only pinned definitions; an allowed but
	// unpinned tool is refused.
	"tools_multi": func() { tools("tools_multi", multi) },
	"tools_files": func() { tools("tools_files", files) },
	"tools_unpinned": func() {
		call("tools_unpinned", multi, "list_secret", path("/public"))
	},
	"tools_rug": func() { call("tools_rug", multi, "list_rug", path("/public")) },

	// Last: read the secret; from now on the guest is labelled pii:alice
	// and a public sink refuses it.
	"flow_tainted_self": func() {
		data, err := secretBlob.Bytes()
		if err != nil {
			rec("flow_tainted_self.read", err)
			return
		}
		out["flow_tainted_self.read"] = res{Errno: "ESUCCESS"}
		fmt.Printf("flow_tainted_self.read: %d bytes\n", len(data))
		call("flow_tainted_self.public", files, "read_file", path("/public/tainted"))
		call("flow_tainted_self.share", share, "send", `{"to":"hr","body":"tainted"}`)
	},
}

// tools lists c's tools and records their names (detail) and the raw
// definitions (body).
func tools(key string, c mandate.Cap) {
	b, err := c.Call(abi.MCPToolsOp, []byte(`{}`))
	if err != nil {
		rec(key, err)
		return
	}
	data, err := b.Bytes()
	if err != nil {
		rec(key, err)
		return
	}
	var defs []struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(data, &defs)
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	out[key] = res{Errno: "ESUCCESS", Body: string(data), Detail: strings.Join(names, ",")}
	fmt.Printf("%s: %s\n", key, data)
}

func main() {
	rawIn, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	var in struct {
		Attacks []string `json:"attacks"`
	}
	if err := json.Unmarshal(rawIn, &in); err != nil {
		panic(err)
	}
	for name, c := range map[string]*mandate.Cap{"files": &files, "naive": &naive, "multi": &multi, "vault": &vault, "share": &share, "ledger": &ledger, "web": &web} {
		if *c, err = mandate.Lookup(name); err != nil {
			panic(err)
		}
	}
	for _, a := range in.Attacks {
		f, ok := attacks[a]
		if !ok {
			out[a] = res{Errno: "UNKNOWN_ATTACK"}
			continue
		}
		f()
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
