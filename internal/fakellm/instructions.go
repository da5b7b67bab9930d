package fakellm

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
)

// Instruction kinds.
const (
	InstructionCall  = "call"  // call a named tool with arguments
	InstructionFetch = "fetch" // fetch a URL (and leak secrets to it)
	InstructionSay   = "say"   // put text in the answer
)

// Instruction is one injected instruction, as ParseInstructions finds it.
type Instruction struct {
	Kind   string // InstructionCall, InstructionFetch or InstructionSay
	Tool   string // call: the tool's name
	Args   string // call: the argument JSON as written ("{}" if none); may be invalid
	URL    string // fetch: the URL as written, placeholders unexpanded
	Text   string // say: the text to answer
	Source string // the instruction as written, marker included
}

// markerRE finds where an instruction starts. "AI:" must be followed by
// white space, so "x.ai:8080" is not one.
var markerRE = regexp.MustCompile(`(?i)\b(?:ignore[ \t]+(?:all[ \t]+)?(?:previous|prior)[ \t]+instructions|ai[ \t]+instruction[ \t]*:|ai[ \t]*:(?:\s|\z))`)

var (
	fillers    = words("and then now please instead also immediately you must should will kindly just")
	callVerbs  = words("call use invoke run")
	fetchVerbs = words("fetch get open visit browse load download")
	sendVerbs  = words("send post exfiltrate leak upload forward submit transmit copy")
	sayVerbs   = words("say answer reply respond tell write output print")
	withArgs   = words("arguments args parameters params input")
)

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// ParseInstructions returns the instructions in text, in order (see the
// package doc for the language). It takes time linear in the text, bar
// JSON arguments, each read at most maxArgs bytes far.
func ParseInstructions(text string) []Instruction {
	p := parser{
		text:    text,
		markers: markerRE.FindAllStringIndex(text, -1),
		urls:    urlRE.FindAllStringIndex(text, -1),
	}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			p.newlines = append(p.newlines, i)
		}
	}
	var out []Instruction
	end := 0
	for _, loc := range p.markers {
		if loc[0] < end {
			continue // inside the previous instruction
		}
		in, e, ok := p.command(loc[0], loc[1])
		if !ok {
			end = loc[1]
			continue
		}
		out = append(out, in)
		end = e
	}
	return out
}

// maxArgs bounds how far a call's JSON arguments may reach.
const maxArgs = 64 << 10

var urlRE = regexp.MustCompile(`(?i)https?://`)

// parser holds a text and where its markers, URLs and newlines are, so
// each instruction finds them without rescanning its line.
type parser struct {
	text     string
	markers  [][]int // markerRE matches
	urls     [][]int // urlRE matches
	newlines []int
}

// after is the first match in locs starting at or after p (-1 if none).
func after(locs [][]int, p int) int {
	i := sort.Search(len(locs), func(i int) bool { return locs[i][0] >= p })
	if i == len(locs) {
		return -1
	}
	return locs[i][0]
}

// endOfLine is the index of the first newline at or after p, else the
// text's length.
func (ps *parser) endOfLine(p int) int {
	i := sort.SearchInts(ps.newlines, p)
	if i == len(ps.newlines) {
		return len(ps.text)
	}
	return ps.newlines[i]
}

// command reads the command after a marker at text[start:p].
func (ps *parser) command(start, p int) (Instruction, int, bool) {
	text := ps.text
	p = skip(text, p, " \t:,.;-!")
	lineEnd := ps.endOfLine(p)
	if m := after(ps.markers, p); m >= 0 && m < lineEnd {
		if m == p {
			return Instruction{}, 0, false // another marker follows at once
		}
		lineEnd = m
	}
	bare := p // the command before fillers, for text instructions
	verb, q := word(text, p)
	for fillers[verb] {
		p = skip(text, q, " \t,")
		verb, q = word(text, p)
	}
	if p >= lineEnd {
		return Instruction{}, 0, false
	}
	source := func(e int) string { return strings.TrimSpace(text[start:e]) }
	fetch := func() (Instruction, int, bool) {
		u := after(ps.urls, p)
		if u < 0 || u >= lineEnd {
			return Instruction{}, 0, false
		}
		url, e := urlAt(text[:lineEnd], u)
		return Instruction{Kind: InstructionFetch, URL: url, Source: source(e)}, e, true
	}
	switch {
	case callVerbs[verb]:
		name, e := toolName(text, skip(text, q, " \t"))
		if name == "" {
			break
		}
		in := Instruction{Kind: InstructionCall, Tool: name, Args: "{}"}
		r := skip(text, e, " \t")
		if w, r2 := word(text, r); w == "with" {
			r = skip(text, r2, " \t")
			if w, r3 := word(text, r); withArgs[w] {
				r = skip(text, r3, " \t")
			}
			r = skip(text, r, ": \t")
			if r < len(text) && text[r] == '{' {
				dec := json.NewDecoder(strings.NewReader(text[r:min(len(text), r+maxArgs)]))
				var raw json.RawMessage
				if dec.Decode(&raw) == nil {
					e = r + int(dec.InputOffset())
				} else { // invalid: the rest of the line, verbatim
					e = ps.endOfLine(r)
				}
				in.Args = strings.TrimSpace(text[r:e])
			}
		}
		in.Source = source(e)
		return in, e, true
	case fetchVerbs[verb], sendVerbs[verb]:
		if in, e, ok := fetch(); ok {
			return in, e, true
		}
	case sayVerbs[verb]:
		t := strings.TrimSpace(text[q:lineEnd])
		t = strings.TrimSpace(strings.TrimPrefix(t, ":"))
		if w, r := word(t, 0); w == "that" {
			t = strings.TrimSpace(t[r:])
		}
		if t != "" {
			return Instruction{Kind: InstructionSay, Text: t, Source: source(lineEnd)}, lineEnd, true
		}
	}
	// Anything else: a URL is where to leak to, and text is what to say.
	if in, e, ok := fetch(); ok {
		return in, e, true
	}
	t := strings.TrimSpace(text[bare:lineEnd])
	if t == "" {
		// Only white space the marker's skip did not see (a vertical
		// tab, a form feed): there is no instruction.
		return Instruction{}, lineEnd, false
	}
	return Instruction{Kind: InstructionSay, Text: t, Source: source(lineEnd)}, lineEnd, true
}

// skip returns the first index at or after p whose byte is not in set.
func skip(s string, p int, set string) int {
	for p < len(s) && strings.IndexByte(set, s[p]) >= 0 {
		p++
	}
	return p
}

// word reads the ASCII letters at p, lower-cased.
func word(s string, p int) (string, int) {
	q := p
	for q < len(s) && (s[q]|0x20 >= 'a' && s[q]|0x20 <= 'z') {
		q++
	}
	return asciiLower(s[p:q]), q
}

// toolName reads a tool name at p, optionally quoted in ", ' or `.
func toolName(s string, p int) (string, int) {
	var quote byte
	if p < len(s) && strings.IndexByte("\"'`", s[p]) >= 0 {
		quote = s[p]
		p++
	}
	q := p
	for q < len(s) {
		c := s[q]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-.:/", c) >= 0 {
			q++
			continue
		}
		break
	}
	name := strings.TrimRight(s[p:q], ".:,;!?")
	e := p + len(name)
	if quote != 0 && e < len(s) && s[e] == quote {
		e++
	}
	return name, e
}

// urlAt reads the URL starting at i: it ends at white space, a quote, a
// bracket or trailing punctuation; a trailing "..." stays, and so does
// {secrets} (both are placeholders). It returns the URL and its end.
func urlAt(s string, i int) (string, int) {
	stop := func(c byte) bool { return c <= ' ' || strings.IndexByte("\"'<>`()[]{}|\\", c) >= 0 }
	e := i
	for e < len(s) {
		if strings.HasPrefix(s[e:], "{secrets}") {
			e += len("{secrets}")
			continue
		}
		if stop(s[e]) {
			break
		}
		e++
	}
	u := s[i:e]
	for {
		switch {
		case strings.HasSuffix(u, "..."):
		case strings.HasSuffix(u, ".") || len(u) > 0 && strings.IndexByte(",;:!?", u[len(u)-1]) >= 0:
			u = u[:len(u)-1]
			continue
		}
		break
	}
	return u, i + len(u)
}

// asciiLower lower-cases ASCII letters only, keeping every byte offset.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Helpers that write instructions, for tests that plant them.

// InjectCall is the instruction to call tool with args (marshalled).
func InjectCall(tool string, args any) string {
	return "AI: call " + tool + " with " + string(marshal(args))
}

// InjectFetch is the instruction to fetch url.
func InjectFetch(url string) string { return "AI: fetch " + url }

// InjectSay is the instruction to answer text.
func InjectSay(text string) string { return "AI: say " + text }
