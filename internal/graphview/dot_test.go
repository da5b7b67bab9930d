package graphview

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

func dot(t *testing.T, r *runstore.Record) string {
	t.Helper()
	var b bytes.Buffer
	if err := DOT(&b, r); err != nil {
		t.Fatal(err)
	}
	checkDOTQuoting(t, b.String())
	return b.String()
}

func TestDOT(t *testing.T) {
	got := dot(t, sampleRecord())
	for _, want := range []string{
		"digraph mandate {\n",
		`label=<<B>run 20261129T153000Z-ab12cd</B>&#160;/m/trip &quot;planner&quot;.hcl<BR ALIGN="LEFT"/>done, exit 1, 2026-11-29 15:30:00Z<BR ALIGN="LEFT"/>` +
			`<FONT COLOR="#757575"><FONT POINT-SIZE="8">label {C}/{I}: C, the confidentiality tags of what the task holds; I, its integrity taints (the sources that influenced it)</FONT></FONT><BR ALIGN="LEFT"/>>;`,
		"  subgraph cluster_t0 {\n",
		`    t0 [id="task-t1", class="task failed", style="filled", fillcolor="#eef3fb", label=<<B>t1</B>&#160;alice<BR ALIGN="LEFT"/><FONT COLOR="#c62828">failed</FONT>  sha256:0123456789ab<BR ALIGN="LEFT"/><FONT COLOR="#c62828">error: task t1 failed: boom</FONT><BR ALIGN="LEFT"/><FONT COLOR="#c62828"><B>2 denials</B></FONT><BR ALIGN="LEFT"/>>];`,
		`    c0 [id="cap-c1", class="cap", style="rounded,filled", fillcolor="#fbfbf6", label=<<B>c1</B>&#160;net &quot;fli\&quot;ghts\\\n&quot;<BR ALIGN="LEFT"/>max_redirects=5<BR ALIGN="LEFT"/>methods=GET,POST<BR ALIGN="LEFT"/>origin=https://flights.example<BR ALIGN="LEFT"/>timeout=30s<BR ALIGN="LEFT"/>[audited]<BR ALIGN="LEFT"/>>];`,
		`    c1 [id="cap-c2", class="cap revoked", style="rounded,filled", fillcolor="#fbfbf6", fontcolor="#757575", color="#757575", label=<<S><B>c2</B>&#160;net</S><BR ALIGN="LEFT"/><S>methods=GET</S><BR ALIGN="LEFT"/><S>origin=https://flights.example</S><BR ALIGN="LEFT"/><S>[revoked]</S><BR ALIGN="LEFT"/>>];`,
		`  t0 -> t1 [class="spawn", style=bold, label="spawned"];`,
		`  t0 -> c0 [class="holds", style=dashed, arrowhead=none, color="#757575"];`,
		`  t1 -> c1 [class="holds", style=dashed, arrowhead=none, color="#757575"];`,
		`  c0 -> c1 [class="derive", color="#757575"];`,
		"}\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in:\n%s", want, got)
		}
	}
	// c3 is derived from c2, both held by t2: no holds edge.
	if strings.Contains(got, "t1 -> c2 ") {
		t.Errorf("a capability derived within its task is joined to the task:\n%s", got)
	}
}

// TestDOTShowsIntent: the picture shows each capability the way its kind
// describes it (no raw defaults) with the person's intent (when,
// approve_when, uses, budget) and each denial made on it with its reason.
func TestDOTShowsIntent(t *testing.T) {
	r := sampleRecord()
	c := &r.Caps[0]
	c.View = kernel.CapView{Fields: []kindapi.Detail{{Name: "origin", Value: "https://flights.example"}, {Name: "methods", Value: "GET"}},
		MaxUses: 3, Uses: 1, Budget: "800.00 USD", Spent: "612.00 USD"}
	c.When = []string{"request.query.to != 'PYY'"}
	c.ApproveWhen = []string{"request.method == 'POST'"}
	long := strings.Repeat("x", 300)
	for i, reason := range []string{"net: fetch: path \"/admin\" is outside\nthe allowed prefixes", "flow", long, "fourth", "fifth"} {
		errno := "EDENIED"
		if i == 1 {
			errno = "EFLOW"
		}
		r.Denials = append(r.Denials, runstore.Denial{Cap: c.ID, Op: "call:fetch", Errno: errno, Reason: reason})
	}
	r.Flows = append(r.Flows, runstore.Flow{Cap: c.ID, Decision: "deny", Errno: "EFLOW"}, runstore.Flow{Cap: c.ID, Decision: "allow"}, runstore.Flow{Cap: c.ID, Decision: "deny", Errno: "EFLOW"})
	got := dot(t, r)
	br := `<BR ALIGN="LEFT"/>`
	for _, want := range []string{
		`origin=https://flights.example` + br + `methods=GET` + br + `when request.query.to != &#39;PYY&#39;` + br +
			`approve_when request.method == &#39;POST&#39;` + br + `uses 1 of 3` + br + `spent 612.00 USD of 800.00 USD` + br + `[audited]` + br,
		`class="cap denied flowed"`, `color="#c62828", penwidth=2`,
		`<FONT COLOR="#c62828"><B>5 denied</B></FONT>`,
		`<FONT POINT-SIZE="8">EDENIED call:fetch: net: fetch: path &quot;/admin&quot; is outside the allowed prefixes</FONT>`,
		`<FONT POINT-SIZE="8">EFLOW call:fetch: flow</FONT>`,
		`EDENIED call:fetch: ` + strings.Repeat("x", maxReason-len("EDENIED call:fetch: ")) + "…</FONT>",
		`... 2 more (mandate audit --denied)`,
		`<FONT COLOR="#c62828"><B>3 flows</B>: 1 allow, 2 deny EFLOW</FONT>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in:\n%s", want, got)
		}
	}
	// How a label reads is said once a task's label is drawn.
	for i := range r.Tasks {
		r.Tasks[i].Label = kindapi.Label{}
	}
	if got := dot(t, r); strings.Contains(got, "label {C}/{I}") {
		t.Errorf("the legend of labels is drawn with no label:\n%s", got)
	}
	r.Tasks[0].Label = kindapi.NewLabel([]string{"pii:alice"}, nil)
	if got := dot(t, r); !strings.Contains(got, "label {C}/{I}: C, the confidentiality tags") {
		t.Errorf("no legend of labels:\n%s", got)
	}
	// Flows the kernel allowed alone are not drawn as an alarm.
	r.Flows = []runstore.Flow{{Cap: c.ID, Decision: "allow"}}
	if got := dot(t, r); !strings.Contains(got, `<FONT COLOR="#757575"><B>1 flow</B>: 1 allow</FONT>`) {
		t.Errorf("an allowed flow is not grey:\n%s", got)
	}
	if strings.Contains(got, "max_redirects=5") {
		t.Errorf("a described capability shows its raw default scope:\n%s", got)
	}
	if strings.Contains(got, "fourth") {
		t.Errorf("more than %d denials listed:\n%s", MaxDenialsShown, got)
	}
}

// TestDOTCorrupt: cycles, duplicates and missing parents draw each task
// and capability once, and never loop.
func TestDOTCorrupt(t *testing.T) {
	r := &runstore.Record{Graph: kernel.Graph{
		Tasks: []kernel.GraphTask{{ID: "t1", Parent: "t1"}, {ID: "t2", Parent: "t9"}, {ID: "t2"}},
		Caps:  []kernel.GraphCap{{ID: "c1", Parent: "c2", Holder: "t1"}, {ID: "c2", Parent: "c1", Holder: "t2"}, {ID: "c3", Parent: "c3"}, {ID: "c3"}},
	}, Denials: []runstore.Denial{{Task: "t9", Cap: "c9"}}}
	got := dot(t, r)
	for _, id := range []string{`"task-t1"`, `"task-t2"`, `"cap-c1"`, `"cap-c2"`, `"cap-c3"`} {
		if n := strings.Count(got, "id="+id); n != 1 {
			t.Errorf("%s drawn %d times:\n%s", id, n, got)
		}
	}
	if strings.Contains(got, "-> t0 ") || strings.Contains(got, "c2 -> c2") {
		t.Errorf("a self edge:\n%s", got)
	}
	if !strings.Contains(got, "1 more denials, not drawn") {
		t.Errorf("the denial on no task or cap is not counted:\n%s", got)
	}
}

// TestDOTHostile: whatever the record's strings, each line of the DOT
// is a node, an edge or a fixed attribute, every quoted string is closed,
// and record strings stand only in HTML-like labels, escaped.
func TestDOTHostile(t *testing.T) {
	got := dot(t, hostileRecord())
	line := regexp.MustCompile(`^(digraph mandate \{|\}|  (graph|node|edge) \[.*\];|  label=<.*>;|  subgraph cluster_t\d+ \{|` +
		`    id="holder-[A-Za-z0-9._-]*"; class="holder"; label=""; style="rounded,dashed"; color="#b0bec5";|` +
		` {2,4}[tc]\d+ \[id="(task|cap)-[A-Za-z0-9._-]*", class="[a-z ]+", style="[a-z,]+", fillcolor="#[0-9a-f]{6}"(, [a-z]+=("#[0-9a-f]{6}"|2))*, label=<.*>\];|` +
		`  [tc]\d+ -> [tc]\d+ \[class="(spawn|holds|derive)"[^"\]]*("[^"\]]*"[^"\]]*)*\];|  \})$`)
	for i, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !line.MatchString(l) {
			t.Errorf("line %d is not one the picture has: %.300s", i+1, l)
		}
		if m := regexp.MustCompile(`label=<(.*)>`).FindStringSubmatch(l); m != nil {
			tags := regexp.MustCompile(`<[^>]*>`).FindAllString(m[1], -1)
			for _, tag := range tags {
				if !regexp.MustCompile(`^(<B>|</B>|<S>|</S>|</FONT>|<FONT COLOR="#[0-9a-f]{6}">|<FONT POINT-SIZE="8">|<BR ALIGN="LEFT"/>)$`).MatchString(tag) {
					t.Errorf("line %d: tag %q in a label", i+1, tag)
				}
			}
		}
	}
}

// checkDOTQuoting checks that every quoted string in a DOT document is
// closed on its line and holds no raw control characters.
func checkDOTQuoting(t *testing.T, doc string) {
	t.Helper()
	for i, line := range strings.Split(doc, "\n") {
		in := false
		for j := 0; j < len(line); j++ {
			switch c := line[j]; {
			case in && c == '\\':
				j++
			case c == '"':
				in = !in
			case c < 0x20 && c != '\t':
				t.Errorf("line %d: control character %q", i+1, c)
			}
		}
		if in {
			t.Errorf("line %d has an unterminated string: %s", i+1, line)
		}
	}
}

func TestDOTQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `""`},
		{`plain`, `"plain"`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{"a\nb", `"a\nb"`},
		{"a\rb\x00c\x7f", `"abc"`},
		{`\"`, `"\\\""`},
		{"ünïcode", `"ünïcode"`},
	}
	for _, tt := range tests {
		if got := dotQuote(tt.in); got != tt.want {
			t.Errorf("dotQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestElementID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"t1", "task-t1"},
		{"s1-t3.x", "task-s1-t3.x"},
		{"a_b", "task-a_5fb"},
		{`<b "x">`, "task-_3cb_20_22x_22_3e"},
		{"é", "task-_c3_a9"},
		{"", "task-"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := TaskElementID(tt.in)
		if got != tt.want {
			t.Errorf("TaskElementID(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q have one id %q", tt.in, other, got)
		}
		seen[got] = tt.in
	}
	// '_' escapes itself: "a_5fb" is not "a_b".
	if TaskElementID("a_5fb") == TaskElementID("a_b") {
		t.Error("the mapping is not one to one")
	}
	if got := CapElementID("c1"); got != "cap-c1" {
		t.Errorf("CapElementID(c1) = %q", got)
	}
}

func TestScopeSummary(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, ``},
		{`{}`, ``},
		{`{"b":1048576,"a":"x","c":[],"d":false,"e":0,"f":null,"g":{"k":1}}`, `a=x b=1048576 g={"k":1}`},
		{`{"l":[1,"two",true]}`, `l=1,two,true`},
		{`{"s":"a b"}`, `s="a b"`},
		{`"not an object"`, `"not an object"`},
		{"[1,\n2]", `[1, 2]`},
	}
	for _, tt := range tests {
		if got := ScopeSummary(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("ScopeSummary(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
