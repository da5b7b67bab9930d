package graphview

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// sampleRecord has a child task, a derivation chain with a revoked cap,
// and names that need escaping in every format.
func sampleRecord() *runstore.Record {
	return &runstore.Record{
		Version: runstore.RecordVersion,
		Run: runstore.Run{
			ID: "20261129T153000Z-ab12cd", Manifest: "/m/trip \"planner\".hcl",
			Started: time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC),
			Ended:   time.Date(2026, 11, 29, 15, 30, 2, 0, time.UTC),
			Exit:    1, State: "done",
		},
		Graph: kernel.Graph{
			Tasks: []kernel.GraphTask{
				{ID: "t1", Principal: "alice", Module: "sha256:0123456789abcdef0123", State: kernel.TaskFailed, Denials: 2, Error: "task t1 failed:\nboom"},
				{ID: "t2", Parent: "t1", Principal: "alice", Module: "sha256:0123456789abcdef0123", State: kernel.TaskDone,
					Label: kindapi.NewLabel(nil, []string{"web:https://flights.example"})},
			},
			Caps: []kernel.GraphCap{
				{ID: "c1", Kind: "net", Name: "fli\"ghts\\\n", Holder: "t1", Scope: json.RawMessage(`{"origin":"https://flights.example","methods":["GET","POST"],"paths":[],"allow_private":false,"timeout":"30s","max_redirects":5}`), Audited: true},
				{ID: "c2", Kind: "net", Holder: "t2", Parent: "c1", Scope: json.RawMessage(`{"origin":"https://flights.example","methods":["GET"]}`), Revoked: true},
				{ID: "c3", Kind: "net", Holder: "t2", Parent: "c2", Scope: json.RawMessage(`{"origin":"https://flights.example"}`), Revoked: true, Dropped: true},
			},
		},
	}
}

// quickstartRecord is shaped like the quickstart's run: one task, its
// root capability with four denials and a derived, revoked one.
func quickstartRecord() *runstore.Record {
	net := func(id, parent string, fields ...string) kernel.GraphCap {
		c := kernel.GraphCap{ID: id, Kind: "net", Holder: "t1", Parent: parent}
		for i := 0; i+1 < len(fields); i += 2 {
			c.View.Fields = append(c.View.Fields, kindapi.Detail{Name: fields[i], Value: fields[i+1]})
		}
		return c
	}
	r := &runstore.Record{
		Version: runstore.RecordVersion,
		Run:     runstore.Run{ID: "20261201T120000Z-ab12cd", Manifest: "examples/quickstart/quickstart.hcl", State: "done"},
		Graph: kernel.Graph{
			Tasks: []kernel.GraphTask{{ID: "t1", Principal: "alice", Module: "sha256:0123456789abcdef0123", State: kernel.TaskDone, Denials: 4,
				Label: kindapi.NewLabel([]string{"web:http://127.0.0.1:40000"}, nil)}},
			Caps: []kernel.GraphCap{
				net("c1", "", "origin", "http://127.0.0.1:40000", "methods", "GET", "paths", "/search", "allow_private", "true", "headers", "Authorization"),
				net("c2", "c1", "origin", "http://127.0.0.1:40000", "methods", "GET", "paths", "/search/oneway"),
			},
		},
	}
	r.Caps[1].Revoked = true
	for _, d := range []struct{ cap, errno, reason string }{
		{"c1", "EDENIED", "net: fetch: origin http://127.0.0.1:40001 is not the capability's origin"},
		{"c1", "EDENIED", `net: fetch: path "/admin" is outside the allowed prefixes`},
		{"c1", "EDENIED", "derive: methods [GET POST] widens [GET]"},
		{"c2", "EREVOKED", "capability c2 was revoked"},
	} {
		r.Denials = append(r.Denials, runstore.Denial{Task: "t1", Principal: "alice", Cap: d.cap, Kind: "net", Op: "call:fetch", Errno: d.errno, Reason: d.reason})
	}
	return r
}

// wideRecord has n tasks: a root spawning n-1 children, each with two
// capabilities (one derived from the root's, passed) and a denial.
func wideRecord(n int) *runstore.Record {
	r := &runstore.Record{Version: runstore.RecordVersion, Run: runstore.Run{ID: "20261201T120000Z-wide00"}}
	r.Caps = append(r.Caps, kernel.GraphCap{ID: "c0", Kind: "net", Holder: "t0",
		View: kernel.CapView{Fields: []kindapi.Detail{{Name: "origin", Value: "https://api.example"}}}})
	r.Tasks = append(r.Tasks, kernel.GraphTask{ID: "t0", Principal: "alice", State: kernel.TaskDone})
	for i := 1; i < n; i++ {
		t := fmt.Sprintf("t%d", i)
		r.Tasks = append(r.Tasks, kernel.GraphTask{ID: t, Parent: "t0", Principal: "alice", State: kernel.TaskDone, Denials: 1})
		a, b := fmt.Sprintf("c%da", i), fmt.Sprintf("c%db", i)
		r.Caps = append(r.Caps,
			kernel.GraphCap{ID: a, Kind: "net", Holder: t, Parent: "c0", When: []string{"request.method == 'GET'"},
				View: kernel.CapView{Passed: true, Fields: []kindapi.Detail{{Name: "origin", Value: "https://api.example"}, {Name: "paths", Value: fmt.Sprintf("/v1/%d", i)}}}},
			kernel.GraphCap{ID: b, Kind: "data", Holder: t, Revoked: i%3 == 0,
				View: kernel.CapView{MaxUses: 10, Uses: int64(i % 10), Fields: []kindapi.Detail{{Name: "collection", Value: "notes"}}}})
		r.Denials = append(r.Denials, runstore.Denial{Task: t, Cap: a, Op: "call:fetch", Errno: "EDENIED", Reason: "net: fetch: path outside the allowed prefixes"})
	}
	return r
}

// hostile are strings a guest or a manifest could choose, each an attack
// on one of the picture's layers (DOT, HTML-like labels, XML, SVG, a
// browser, a terminal).
var hostile = []string{
	`<img src=x onerror=alert(1)>`,
	`"]; evil [label="`,
	`"]; evil [URL="javascript:alert(1)", href="x"]; x [label="`,
	`]]>`,
	`<script>alert(1)</script>`,
	`javascript:alert(1)`,
	"\x1b[31mred\x1b[0m",
	"c1 \u0085\u009b31m",
	"bad \xff\xfe utf-8",
	"nul \x00 byte",
	"bidi \u202egnp.exe",
	`--> <!-- comment`,
	`&lt;script&gt; &amp; &#x3c;b&#x3e;`,
	`\N \G \L \E \T \H \n \l`,
	`<TABLE><TR><TD HREF="javascript:x">x</TD></TR></TABLE>`,
	`<IMG SRC="/etc/passwd"/>`,
	`<a xlink:href="javascript:alert(1)" onclick="x">`,
	strings.Repeat("long ", 20000),
}

// hostileRecord puts the hostile strings in every string of a record.
func hostileRecord() *runstore.Record {
	h := func(i int) string { return hostile[i%len(hostile)] }
	r := &runstore.Record{Version: runstore.RecordVersion,
		Run: runstore.Run{ID: h(0), Manifest: h(1), State: h(2), Error: h(3)}}
	for i := range hostile {
		tid := h(i)
		r.Tasks = append(r.Tasks, kernel.GraphTask{ID: tid, Parent: h(i + len(hostile) - 1), Principal: h(i + 1), Module: h(i + 2),
			State: kernel.TaskState(h(i + 3)), Denials: i, Error: h(i + 4),
			Label: kindapi.NewLabel([]string{h(i + 5)}, []string{h(i + 6)})})
		cid := "cap" + h(i)
		c := kernel.GraphCap{ID: cid, Kind: h(i + 1), Name: h(i + 2), Holder: tid, Parent: "cap" + h(i+len(hostile)-1),
			Scope: json.RawMessage(fmt.Sprintf(`{%q: %q}`, h(i+3), h(i+4))),
			When:  []string{h(i + 5)}, ApproveWhen: []string{h(i + 6)}, Rate: h(i + 7),
			Revoked: i%2 == 0, Dropped: i%3 == 0, Audited: i%4 == 0,
			View: kernel.CapView{MaxUses: 3, Uses: 1, Budget: h(i + 8), Spent: h(i + 9), Passed: i%2 == 1}}
		if i%2 == 0 {
			c.View.Fields = []kindapi.Detail{{Name: h(i + 10), Value: h(i + 11)}, {Name: "x", Value: h(i + 12)}}
		}
		r.Caps = append(r.Caps, c)
		for j := 0; j < 5; j++ {
			r.Denials = append(r.Denials, runstore.Denial{Task: tid, Cap: cid, Kind: h(i + j), Op: h(i + j + 1), Errno: h(i + j + 2), Reason: h(i + j + 3)})
		}
		r.Denials = append(r.Denials, runstore.Denial{Task: tid, Op: h(i), Errno: "EINVAL", Reason: h(i + 1)})
		r.Flows = append(r.Flows, runstore.Flow{Task: tid, Cap: cid, Decision: h(i), Errno: h(i + 1)})
	}
	r.Denials = append(r.Denials, runstore.Denial{Task: "nobody", Cap: "nothing", Reason: h(0)})
	r.DenialsDropped, r.FlowsDropped = 7, 3
	return r
}
