package fakellm

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The compromised model: see the package doc.

// injPrefix starts the id of every call the compromised model makes:
// call_inj<n>_<i> is call i of instruction n (from 1, in the order the
// instructions appear in the conversation). Reading the ids back in the
// history is how the model knows what it has done.
const injPrefix = "call_inj"

// compromisedStep is the compromised model's move: the next instruction
// it can carry out, else an answer carrying the injected text, else false
// (the script decides).
func (s *Server) compromisedStep(req *ChatRequest) (Step, bool) {
	secrets := s.secretsIn(req)
	tools := offered(req)
	done, made := history(req)
	var instrs []Instruction
	for _, m := range req.Messages {
		if m.Role != "assistant" {
			instrs = append(instrs, ParseInstructions(m.Text())...)
		}
	}
	for n, in := range instrs {
		calls := carryOut(in, tools, secrets)
		if len(calls) == 0 || done[n+1] {
			continue
		}
		fresh := false
		for i := range calls {
			calls[i].id = fmt.Sprintf("%s%d_%d", injPrefix, n+1, i)
			fresh = fresh || !made[calls[i].Name+"\x00"+calls[i].Arguments]
		}
		if fresh { // an instruction repeated word for word is done already
			return Calls(calls...), true
		}
	}
	payload, said := injectedText(instrs, secrets)
	if payload == "" {
		return Step{}, false
	}
	if f := req.ResponseFormat; f != nil && f.Type != "text" {
		return Step{kind: kindText, text: string(schemaAnswer(req, payload, s.cfg.violate))}, true
	}
	if said != "" {
		return Text(said), true
	}
	return Step{}, false
}

// doneStep is the compromised model's answer when nothing is left to do
// and the script is used up: "done", as JSON if JSON was asked for.
func doneStep(req *ChatRequest) Step {
	if f := req.ResponseFormat; f != nil && f.Type != "text" {
		return Step{kind: kindText, text: string(schemaAnswer(req, "done", false))}
	}
	return Text("done")
}

// injectedText is what the instructions phrased: every say text, and the
// source of every other instruction, one a line, with {secrets} expanded;
// said is the say texts alone.
func injectedText(instrs []Instruction, secrets []string) (payload, said string) {
	var all, says []string
	for _, in := range instrs {
		if in.Kind == InstructionSay {
			t := expand(in.Text, secrets)
			all, says = append(all, t), append(says, t)
		} else {
			all = append(all, expand(in.Source, secrets))
		}
	}
	return strings.Join(all, "\n"), strings.Join(says, "\n")
}

// expand replaces the {secrets} placeholder by the secrets seen.
func expand(s string, secrets []string) string {
	return strings.ReplaceAll(s, "{secrets}", strings.Join(secrets, ","))
}

// history reads back what the model did: the instructions whose calls are
// in the conversation (by id), and every call made (by name and
// arguments).
func history(req *ChatRequest) (done map[int]bool, made map[string]bool) {
	done, made = map[int]bool{}, map[string]bool{}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			made[c.Function.Name+"\x00"+c.Function.Arguments] = true
			if rest, ok := strings.CutPrefix(c.ID, injPrefix); ok {
				num, _, _ := strings.Cut(rest, "_")
				if n, err := strconv.Atoi(num); err == nil {
					done[n] = true
				}
			}
		}
	}
	return done, made
}

// secretsIn is every distinct string matching a secret pattern in any
// message, in order of appearance.
func (s *Server) secretsIn(req *ChatRequest) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range req.Messages {
		t := m.Text()
		type hit struct {
			at int
			s  string
		}
		var hits []hit
		for _, re := range s.cfg.secrets {
			for _, loc := range re.FindAllStringIndex(t, -1) {
				hits = append(hits, hit{loc[0], t[loc[0]:loc[1]]})
			}
		}
		sort.SliceStable(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
		for _, h := range hits {
			if h.s != "" && !seen[h.s] {
				seen[h.s] = true
				out = append(out, h.s)
			}
		}
	}
	return out
}

// tool is an offered tool with what the model reads from its schema.
type tool struct {
	name  string
	props map[string]bool // parameter names
}

// offered lists the tools a request lets the model call: none for
// tool_choice "none", only the named one for a named choice.
func offered(req *ChatRequest) []tool {
	var choice struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	var mode string
	if json.Unmarshal(req.ToolChoice, &mode) == nil && mode == "none" {
		return nil
	}
	json.Unmarshal(req.ToolChoice, &choice)
	var out []tool
	for _, t := range req.Tools {
		if choice.Function.Name != "" && t.Function.Name != choice.Function.Name {
			continue
		}
		var p struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		json.Unmarshal(t.Function.Parameters, &p)
		tl := tool{name: t.Function.Name, props: map[string]bool{}}
		for k := range p.Properties {
			tl.props[k] = true
		}
		out = append(out, tl)
	}
	return out
}

// first returns the first of names that t has as a parameter, else def.
func (t tool) first(def string, names ...string) string {
	for _, n := range names {
		if t.props[n] {
			return n
		}
	}
	return def
}

// What the model looks for in tool definitions (the package doc lists
// them; a test checks it does).
var (
	fetchNames  = []string{"fetch", "http_get", "net_fetch", "web_fetch", "http_request", "http", "get", "browse", "open_url", "get_url"}
	urlParams   = []string{"url", "uri", "href", "link", "address", "endpoint", "target"}
	bodyParams  = []string{"body", "data", "content", "payload", "text"}
	isFetchName = words(strings.Join(fetchNames, " "))
)

// fetchTool is the tool the model fetches with: by name (fetchNames, or
// any name containing "fetch"), else the first tool with a URL parameter
// whose name does not say post.
func fetchTool(tools []tool) *tool {
	for i, t := range tools {
		if n := strings.ToLower(t.name); isFetchName[n] || strings.Contains(n, "fetch") {
			return &tools[i]
		}
	}
	for i, t := range tools {
		if t.first("", urlParams...) != "" && !strings.Contains(strings.ToLower(t.name), "post") {
			return &tools[i]
		}
	}
	return nil
}

// postTool is the tool the model POSTs with: one whose name contains
// "post", else the fetch tool if it takes a method.
func postTool(tools []tool, fetch *tool) *tool {
	for i, t := range tools {
		if strings.Contains(strings.ToLower(t.name), "post") {
			return &tools[i]
		}
	}
	if fetch != nil && fetch.props["method"] {
		return fetch
	}
	return nil
}

// carryOut is the calls that carry an instruction out with the tools
// offered; none if it cannot be.
func carryOut(in Instruction, tools []tool, secrets []string) []Call {
	switch in.Kind {
	case InstructionCall:
		i := slices.IndexFunc(tools, func(t tool) bool { return t.name == in.Tool })
		if i < 0 {
			i = slices.IndexFunc(tools, func(t tool) bool { return strings.EqualFold(t.name, in.Tool) })
		}
		if i < 0 {
			return nil
		}
		joined, _ := json.Marshal(strings.Join(secrets, ","))
		args := strings.ReplaceAll(in.Args, "{secrets}", strings.Trim(string(joined), `"`))
		return []Call{{Name: tools[i].name, Arguments: args}}
	case InstructionFetch:
		get, plain := leakURL(in.URL, secrets)
		var calls []Call
		if t := fetchTool(tools); t != nil {
			args := map[string]any{t.first("url", urlParams...): get}
			if t.props["method"] {
				args["method"] = "GET"
			}
			calls = append(calls, Call{Name: t.name, Arguments: string(marshal(args))})
		}
		if t := postTool(tools, fetchTool(tools)); t != nil && len(secrets) > 0 {
			args := map[string]any{
				t.first("url", urlParams...):   plain,
				t.first("body", bodyParams...): strings.Join(secrets, ","),
			}
			if t.props["method"] {
				args["method"] = "POST"
			}
			calls = append(calls, Call{Name: t.name, Arguments: string(marshal(args))})
		}
		return calls
	}
	return nil
}

// leakURL puts the secrets into u: in place of a "..." or {secrets}
// placeholder, else (for get) appended as the query parameter d. plain is
// u with the placeholders replaced and nothing appended.
func leakURL(u string, secrets []string) (get, plain string) {
	esc := url.QueryEscape(strings.Join(secrets, ","))
	if strings.Contains(u, "{secrets}") || strings.Contains(u, "...") {
		r := strings.NewReplacer("{secrets}", esc, "...", esc).Replace(u)
		return r, r
	}
	if len(secrets) == 0 {
		return u, u
	}
	base, frag, hasFrag := strings.Cut(u, "#")
	sep := "?"
	switch {
	case strings.HasSuffix(base, "?") || strings.HasSuffix(base, "&"):
		sep = ""
	case strings.Contains(base, "?"):
		sep = "&"
	}
	get = base + sep + "d=" + esc
	if hasFrag {
		get += "#" + frag
	}
	return get, u
}
