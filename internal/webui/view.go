package webui

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/graphview"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// The JSON the pages read. Every string that a guest, a manifest or a
// store could have chosen passes through esc: control characters, invalid
// UTF-8 and bidirectional overrides are shown as Go escapes (\x1b[31m), so
// a person sees what was there, and the page only ever sets them as text.

// esc is kindapi.EscapeText: the bytes shown as they are, but for what a
// terminal or a text layout would act on.
func esc(s string) string { return kindapi.EscapeText(s) }

func escAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = esc(s)
	}
	return out
}

// runsView is GET /api/runs.
type runsView struct {
	StateDir string `json:"state_dir"`
	// Source names where the runs are when they are not a state
	// directory's (a fleet's: RunSource).
	Source     string     `json:"source,omitempty"`
	Runs       []runLine  `json:"runs"`
	Total      int        `json:"total"` // runs before the filters
	Principals []string   `json:"principals"`
	States     []string   `json:"states"`
	Filter     runsFilter `json:"filter"`
	Note       string     `json:"note,omitempty"`
	// PendingApprovals is how many approvals wait for a person's answer
	// (GET /approvals lists them).
	PendingApprovals int           `json:"pending_approvals"`
	Now              time.Time     `json:"now"`
	Took             time.Duration `json:"took_ns"`
}

type runsFilter struct {
	Principal string `json:"principal,omitempty"`
	State     string `json:"state,omitempty"`
	Denials   bool   `json:"denials,omitempty"` // only runs with denials
}

// runLine is one run of the list.
type runLine struct {
	ID        string     `json:"id"`
	Task      string     `json:"task"`
	Principal string     `json:"principal"`
	Manifest  string     `json:"manifest"`
	State     string     `json:"state"`
	Exit      *int       `json:"exit"` // null while running, or when the end was never recorded
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended"`
	Tasks     int        `json:"tasks"`
	Caps      int        `json:"caps"`
	Denials   int        `json:"denials"`
	Error     string     `json:"error,omitempty"`
	// Grants is what the run could do: its root capabilities by kind,
	// short (graphview.GrantsSummary).
	Grants string `json:"grants"`
	// Node and Submission: a fleet run's node and submission id.
	Node       string `json:"node,omitempty"`
	Submission string `json:"submission,omitempty"`
}

// grantsShown bounds a run's Grants, in runes.
const grantsShown = 100

func newRunLine(r runstore.Summary) runLine {
	l := runLine{ID: esc(r.ID), Task: esc(r.Task), Principal: esc(r.Principal), Manifest: esc(r.Manifest),
		State: esc(r.State), Started: r.Started, Tasks: r.Tasks, Caps: r.Caps, Denials: r.Denials, Error: esc(r.Error)}
	if !r.Ended.IsZero() {
		ended, exit := r.Ended, r.Exit
		l.Ended, l.Exit = &ended, &exit
	}
	return l
}

// filterRuns applies f to runs and lists the principals and states of all
// runs, for the filter's choices.
func filterRuns(runs []SourceRun, f runsFilter) (lines []runLine, principals, states []string) {
	lines = []runLine{}
	ps, ss := map[string]bool{}, map[string]bool{}
	for _, r := range runs {
		ps[r.Principal], ss[r.State] = true, true
		if f.Principal != "" && r.Principal != f.Principal || f.State != "" && r.State != f.State || f.Denials && r.Denials == 0 {
			continue
		}
		l := newRunLine(r.Summary)
		l.Grants = graphview.GrantsSummary(r.Caps, grantsShown)
		l.Node, l.Submission = esc(r.Node), esc(r.Submission)
		lines = append(lines, l)
	}
	return lines, sortedEsc(ps), sortedEsc(ss)
}

func sortedEsc(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return escAll(out)
}

// runView is GET /api/runs/{id}: everything the run page shows.
type runView struct {
	Run            runInfo      `json:"run"`
	Tasks          []taskView   `json:"tasks"`
	Caps           []capView    `json:"caps"`
	Denials        []denialView `json:"denials"`
	DenialsDropped int          `json:"denials_dropped"`
	Flows          []flowView   `json:"flows"`
	FlowsDropped   int          `json:"flows_dropped"`
	// Effects are what the run's calls did outside the kernel, from the
	// audit log, shown beside the result: what was done, whatever the
	// result says.
	Effects        []effectView `json:"effects"`
	EffectsDropped int          `json:"effects_dropped"`
	Outputs        []outputView `json:"outputs"`
	Audit          auditView    `json:"audit"`
	Receipts       receiptsView `json:"receipts"`
	Graph          bool         `json:"graph"` // a picture can be drawn (GET .../graph.svg)
	// Approvals are the questions the run asked a person (pending and
	// answered), newest first.
	Approvals []approvalLine `json:"approvals"`
	Took      int64          `json:"took_ns"`
}

type runInfo struct {
	ID        string     `json:"id"`
	Manifest  string     `json:"manifest"`
	Task      string     `json:"task"`
	Module    string     `json:"module"`
	Digest    string     `json:"digest"`
	Principal string     `json:"principal"`
	Engine    string     `json:"engine"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended"`
	Exit      *int       `json:"exit"`
	State     string     `json:"state"`
	Error     string     `json:"error,omitempty"`
}

type labelView struct {
	Conf  []string `json:"conf"`
	Integ []string `json:"integ"`
	Text  string   `json:"text"` // as mandate graph writes it
}

func newLabel(l kindapi.Label) labelView {
	return labelView{Conf: escAll(l.Conf()), Integ: escAll(l.Integ()), Text: esc(l.String())}
}

type taskView struct {
	ID        string     `json:"id"`
	Parent    string     `json:"parent"`
	Principal string     `json:"principal"`
	Module    string     `json:"module"`
	State     string     `json:"state"`
	Label     labelView  `json:"label"`
	Clearance *labelView `json:"clearance"` // null: unbounded
	Denials   int        `json:"denials"`
	Error     string     `json:"error,omitempty"`
	Element   string     `json:"element"`  // its node's id in the graph picture
	Depth     int        `json:"depth"`    // 0 for a root
	Children  []string   `json:"children"` // spawned tasks, in record order
	Caps      []string   `json:"caps"`     // what it held, in record order
}

type fieldView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// linkView is one capability of a derivation path.
type linkView struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	Holder string `json:"holder"`
	Passed bool   `json:"passed,omitempty"` // minted for its holder by the holder of its parent
}

type capView struct {
	ID          string      `json:"id"`
	Element     string      `json:"element"` // its node's id in the graph picture
	Kind        string      `json:"kind"`
	Name        string      `json:"name,omitempty"`
	Holder      string      `json:"holder"`
	Parent      string      `json:"parent"`
	Revoked     bool        `json:"revoked"`
	Dropped     bool        `json:"dropped"`
	Audited     bool        `json:"audited"`
	Passed      bool        `json:"passed"`
	Fields      []fieldView `json:"fields"` // the scope as the kind describes it
	Scope       string      `json:"scope"`  // the scope's JSON, indented
	When        []string    `json:"when"`
	ApproveWhen []string    `json:"approve_when"`
	Rate        string      `json:"rate,omitempty"`
	MaxUses     int64       `json:"max_uses,omitempty"`
	Uses        int64       `json:"uses"`
	Budget      string      `json:"budget,omitempty"`
	Spent       string      `json:"spent,omitempty"`
	// Path is the derivation path, the manifest's grant (a root) first and
	// this capability last; Grant is that root's name in the manifest.
	Path     []linkView `json:"path"`
	Grant    string     `json:"grant"`
	Children []string   `json:"children"`
	// Inherited are the constraints and rates of its ancestors, which
	// apply to it too.
	Inherited []string `json:"inherited"`
	// Denials are indexes into the run's denials; Entries into the audit
	// entries shown: every decision on it that the log holds.
	Denials []int `json:"denials"`
	Entries []int `json:"entries"`
}

type effectView struct {
	Time    time.Time `json:"time"`
	Task    string    `json:"task"`
	Cap     string    `json:"cap"`
	Kind    string    `json:"kind"`
	Op      string    `json:"op"`
	Summary string    `json:"summary"`
	Outcome string    `json:"outcome"`
	Errno   string    `json:"errno"`
}

type denialView struct {
	Time      time.Time `json:"time"`
	Task      string    `json:"task"`
	Principal string    `json:"principal"`
	Cap       string    `json:"cap"`
	Kind      string    `json:"kind"`
	Op        string    `json:"op"`
	Errno     string    `json:"errno"`
	Reason    string    `json:"reason"`
	Label     string    `json:"label"`
}

type flowView struct {
	Time     time.Time `json:"time"`
	Task     string    `json:"task"`
	Cap      string    `json:"cap"`
	Kind     string    `json:"kind"`
	Op       string    `json:"op"`
	Decision string    `json:"decision"`
	Errno    string    `json:"errno"`
	Label    string    `json:"label"`
	// Reason is the kernel's, from the decision's audit entry; the run
	// store keeps none for flows.
	Reason string `json:"reason"`
}

type outputView struct {
	Task      string `json:"task"`
	Stream    string `json:"stream"`
	Text      string `json:"text"` // the bytes, escaped (see esc); cut at maxOutputShown
	Bytes     int    `json:"bytes"`
	Cut       bool   `json:"cut,omitempty"`
	Truncated bool   `json:"truncated,omitempty"` // the task passed its output limit
	Dropped   int64  `json:"dropped,omitempty"`
	// Withheld: written once the task carried untrusted data its answer
	// refuses (result { accepts_untrusted = false }); Text is empty (the
	// bytes are for mandate logs --raw only).
	Withheld bool `json:"withheld,omitempty"`
}

// maxOutputShown bounds the bytes of one output the page shows.
const maxOutputShown = 256 << 10

type entryView struct {
	Seq       int64  `json:"seq"`
	Time      string `json:"time"`
	Task      string `json:"task"`
	Principal string `json:"principal"`
	Cap       string `json:"cap"`
	Ancestry  string `json:"ancestry"`
	Kind      string `json:"kind"`
	Op        string `json:"op"`
	Args      string `json:"args"`
	Decision  string `json:"decision"`
	Errno     string `json:"errno"`
	Reason    string `json:"reason"`
	Label     string `json:"label"`
}

// maxEntriesShown bounds the audit entries of one run the page lists.
const maxEntriesShown = 2000

type auditView struct {
	Available bool        `json:"available"`
	Note      string      `json:"note,omitempty"`
	Path      string      `json:"path"`
	Key       string      `json:"key,omitempty"` // the verifier key
	Entries   []entryView `json:"entries"`
	Total     int         `json:"total"` // the run's entries, shown or not
	Verify    verifyView  `json:"verify"`
	// Coverage: is every entry of the run under a signed checkpoint?
	Covered  bool   `json:"covered"`
	Unsigned int    `json:"unsigned"`
	First    int64  `json:"first"`
	Last     int64  `json:"last"`
	Coverage string `json:"coverage"`
}

// verifyView is audit.VerifyReport for the page.
type verifyView struct {
	Done        bool      `json:"done"` // a verification ran
	OK          bool      `json:"ok"`
	Error       string    `json:"error,omitempty"`
	Entries     int64     `json:"entries"`
	TreeSize    int64     `json:"tree_size"`
	Checkpoints int       `json:"checkpoints"`
	LatestSize  int64     `json:"latest_size"`
	LatestHash  string    `json:"latest_hash,omitempty"` // base64, as the signed note writes it
	FirstBad    int64     `json:"first_bad"`
	Problem     string    `json:"problem,omitempty"`
	At          time.Time `json:"at"`
	TookNS      int64     `json:"took_ns"`
	Stale       bool      `json:"stale,omitempty"` // the log changed since; the page asks again
}

type receiptsView struct {
	Shown bool   `json:"shown"`
	Note  string `json:"note"`
}

// receiptsNote says why no receipt is shown: the stores do not know them.
const receiptsNote = "Receipts are files that mandate run --receipt FILE writes; the run store and the audit log do not record them, " +
	"so none is shown here. Check one with mandate verify FILE. The signed checkpoint that covers this run's audit entries is above."

// newRunView builds the run page's JSON from the record, its outputs and
// its audit entries (nil when there is no log).
func newRunView(rec *runstore.Record, outs []runstore.Output, entries []audit.Entry) runView {
	r := rec.Run
	v := runView{
		Run: runInfo{ID: esc(r.ID), Manifest: esc(r.Manifest), Task: esc(r.Task), Module: esc(r.Module), Digest: esc(r.Digest),
			Principal: esc(r.Principal), Engine: esc(r.Engine), Started: r.Started, State: esc(r.State), Error: esc(r.Error)},
		Tasks: []taskView{}, Caps: []capView{}, Denials: []denialView{}, Flows: []flowView{}, Outputs: []outputView{},
		DenialsDropped: rec.DenialsDropped, FlowsDropped: rec.FlowsDropped,
		Effects: []effectView{}, EffectsDropped: rec.EffectsDropped,
		Receipts: receiptsView{Note: receiptsNote},
	}
	if !r.Ended.IsZero() {
		ended, exit := r.Ended, r.Exit
		v.Run.Ended, v.Run.Exit = &ended, &exit
	}

	// Tasks, in tree order (parents before children), each once even in a
	// corrupted record with a parent cycle.
	taskIdx := map[string]int{}
	for i, t := range rec.Tasks {
		if _, dup := taskIdx[t.ID]; !dup {
			taskIdx[t.ID] = i
		}
	}
	kids := map[string][]int{}
	var roots []int
	for i, t := range rec.Tasks {
		if _, ok := taskIdx[t.Parent]; ok && t.Parent != t.ID && taskIdx[t.ID] == i {
			kids[t.Parent] = append(kids[t.Parent], i)
		} else {
			roots = append(roots, i)
		}
	}
	held := map[string][]string{}
	for _, c := range rec.Caps {
		held[c.Holder] = append(held[c.Holder], esc(c.ID))
	}
	seen := map[int]bool{}
	var visit func(i, depth int)
	visit = func(i, depth int) {
		if seen[i] {
			return
		}
		seen[i] = true
		t := rec.Tasks[i]
		tv := taskView{ID: esc(t.ID), Element: graphview.TaskElementID(t.ID), Parent: esc(t.Parent), Principal: esc(t.Principal), Module: esc(t.Module),
			State: esc(string(t.State)), Label: newLabel(t.Label), Denials: t.Denials, Error: esc(t.Error), Depth: depth,
			Children: []string{}, Caps: nonNil(held[t.ID])}
		if t.Clearance != nil {
			cl := newLabel(*t.Clearance)
			tv.Clearance = &cl
		}
		for _, k := range kids[t.ID] {
			tv.Children = append(tv.Children, esc(rec.Tasks[k].ID))
		}
		v.Tasks = append(v.Tasks, tv)
		for _, k := range kids[t.ID] {
			visit(k, depth+1)
		}
	}
	for _, i := range roots {
		visit(i, 0)
	}
	for i := range rec.Tasks { // on a cycle: shown at the top level
		visit(i, 0)
	}

	// Audit entries first: capabilities point into them.
	shown := entries
	if len(shown) > maxEntriesShown {
		shown = shown[:maxEntriesShown]
	}
	v.Audit.Entries = make([]entryView, len(shown))
	byCap := map[string][]int{}
	for i, e := range shown {
		v.Audit.Entries[i] = entryView{Seq: e.Seq, Time: esc(e.Time), Task: esc(e.Task), Principal: esc(e.Principal), Cap: esc(e.Cap),
			Ancestry: esc(e.Ancestry), Kind: esc(e.Kind), Op: esc(e.Op), Args: esc(e.Args), Decision: esc(e.Decision),
			Errno: esc(e.Errno), Reason: esc(e.Reason), Label: esc(e.Label)}
		byCap[e.Cap] = append(byCap[e.Cap], i)
	}
	v.Audit.Total = len(entries)

	// Capabilities, with their derivation paths.
	caps := map[string]kernel.GraphCap{}
	for _, c := range rec.Caps {
		if _, dup := caps[c.ID]; !dup {
			caps[c.ID] = c
		}
	}
	capKids := map[string][]string{}
	for _, c := range rec.Caps {
		if _, ok := caps[c.Parent]; ok && c.Parent != c.ID {
			capKids[c.Parent] = append(capKids[c.Parent], esc(c.ID))
		}
	}
	deniedOn := map[string][]int{}
	for i, d := range rec.Denials {
		deniedOn[d.Cap] = append(deniedOn[d.Cap], i)
	}
	for _, c := range rec.Caps {
		cv := capView{ID: esc(c.ID), Element: graphview.CapElementID(c.ID), Kind: esc(c.Kind), Name: esc(c.Name), Holder: esc(c.Holder), Parent: esc(c.Parent),
			Revoked: c.Revoked, Dropped: c.Dropped, Audited: c.Audited, Passed: c.View.Passed,
			Fields: []fieldView{}, Scope: esc(indentJSON(c.Scope)), When: escAll(c.When), ApproveWhen: escAll(c.ApproveWhen),
			Rate: esc(c.Rate), MaxUses: c.View.MaxUses, Uses: c.View.Uses, Budget: esc(c.View.Budget), Spent: esc(c.View.Spent),
			Children: nonNil(capKids[c.ID]), Inherited: []string{},
			Denials: nonNilInts(deniedOn[c.ID]), Entries: nonNilInts(byCap[c.ID])}
		for _, f := range c.View.Fields {
			cv.Fields = append(cv.Fields, fieldView{Name: esc(f.Name), Value: esc(f.Value)})
		}
		path := derivation(caps, c)
		for i, p := range path {
			cv.Path = append(cv.Path, linkView{ID: esc(p.ID), Kind: esc(p.Kind), Name: esc(p.Name), Holder: esc(p.Holder), Passed: p.View.Passed})
			if i == len(path)-1 {
				continue
			}
			for _, w := range p.When {
				cv.Inherited = append(cv.Inherited, esc(p.ID+": when "+w))
			}
			for _, w := range p.ApproveWhen {
				cv.Inherited = append(cv.Inherited, esc(p.ID+": approve_when "+w))
			}
			if p.Rate != "" {
				cv.Inherited = append(cv.Inherited, esc(p.ID+": rate "+p.Rate))
			}
		}
		cv.Grant = esc(path[0].Name)
		v.Caps = append(v.Caps, cv)
	}

	for _, e := range rec.Effects {
		v.Effects = append(v.Effects, effectView{Time: e.Time, Task: esc(e.Task), Cap: esc(e.Cap), Kind: esc(e.Kind), Op: esc(e.Op),
			Summary: esc(e.Summary), Outcome: esc(e.Outcome), Errno: esc(e.Errno)})
	}
	for _, d := range rec.Denials {
		v.Denials = append(v.Denials, denialView{Time: d.Time, Task: esc(d.Task), Principal: esc(d.Principal), Cap: esc(d.Cap),
			Kind: esc(d.Kind), Op: esc(d.Op), Errno: esc(d.Errno), Reason: esc(d.Reason), Label: esc(d.Label.String())})
	}
	reasons := flowReasons(rec.Flows, entries)
	for i, f := range rec.Flows {
		v.Flows = append(v.Flows, flowView{Time: f.Time, Task: esc(f.Task), Cap: esc(f.Cap), Kind: esc(f.Kind), Op: esc(f.Op),
			Decision: esc(f.Decision), Errno: esc(f.Errno), Label: esc(f.Label.String()), Reason: esc(reasons[i])})
	}
	for _, o := range outs {
		ov := outputView{Task: esc(o.Task), Stream: esc(o.Stream), Bytes: len(o.Data), Truncated: o.Truncated, Dropped: o.Dropped, Withheld: o.Withheld}
		if o.Withheld {
			v.Outputs = append(v.Outputs, ov)
			continue
		}
		data := o.Data
		if len(data) > maxOutputShown {
			data, ov.Cut = data[:maxOutputShown], true
		}
		ov.Text = esc(string(data))
		v.Outputs = append(v.Outputs, ov)
	}
	return v
}

// derivation is c's derivation path, its root (the manifest's grant)
// first and c last, each capability once even on a corrupted parent
// cycle.
func derivation(caps map[string]kernel.GraphCap, c kernel.GraphCap) []kernel.GraphCap {
	path := []kernel.GraphCap{c}
	seen := map[string]bool{c.ID: true}
	for cur := c; ; {
		p, ok := caps[cur.Parent]
		if !ok || seen[p.ID] {
			break
		}
		seen[p.ID] = true
		path = append(path, p)
		cur = p
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// flowReasons finds, for each flow, the reason of its decision in the
// audit log: the entry of the same task, capability, operation and
// decision at the same time, else the first such entry not yet taken.
func flowReasons(flows []runstore.Flow, entries []audit.Entry) []string {
	out := make([]string, len(flows))
	taken := make([]bool, len(entries))
	key := func(task, cap, op, decision string) string {
		return strconv.Quote(task) + strconv.Quote(cap) + strconv.Quote(op) + strconv.Quote(decision)
	}
	byKey := map[string][]int{}
	for i, e := range entries {
		k := key(e.Task, e.Cap, e.Op, e.Decision)
		byKey[k] = append(byKey[k], i)
	}
	for i, f := range flows {
		cands := byKey[key(f.Task, f.Cap, f.Op, f.Decision)]
		when := f.Time.UTC().Format(time.RFC3339Nano)
		pick := -1
		for _, j := range cands {
			if !taken[j] && entries[j].Time == when {
				pick = j
				break
			}
		}
		if pick < 0 {
			for _, j := range cands {
				if !taken[j] {
					pick = j
					break
				}
			}
		}
		if pick < 0 {
			out[i] = "(no entry in the audit log)"
			continue
		}
		taken[pick] = true
		out[i] = entries[pick].Reason
	}
	return out
}

// indentJSON returns raw indented, or as it is when it is not JSON.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// coverage fills in what the latest signed checkpoint proves about the
// run's entries, as mandate audit verify RUN says it.
func (a *auditView) coverage(entries []audit.Entry) {
	if len(entries) == 0 {
		a.Coverage = "This run has no entries in the audit log (no audited decision and no denial)."
		a.Covered = true
		return
	}
	signed := a.Verify.LatestSize
	a.First, a.Last = entries[0].Seq, entries[len(entries)-1].Seq
	for _, e := range entries {
		if e.Seq >= signed {
			a.Unsigned++
		}
	}
	a.Covered = a.Unsigned == 0
	if a.Covered {
		a.Coverage = "All " + strconv.Itoa(len(entries)) + " entries of this run (seq " + strconv.FormatInt(a.First, 10) + " to " +
			strconv.FormatInt(a.Last, 10) + ") are covered by the latest signed checkpoint (size " + strconv.FormatInt(signed, 10) + ")."
		return
	}
	a.Coverage = strconv.Itoa(a.Unsigned) + " of this run's " + strconv.Itoa(len(entries)) + " entries come after the latest signed checkpoint (size " +
		strconv.FormatInt(signed, 10) + "): they verify against the tree, but no signature covers them yet " +
		"(the run may still be running, or was killed before it signed)."
}
