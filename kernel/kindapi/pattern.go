package kindapi

import (
	"bytes"
	"encoding/json"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Parts of text by pattern (abi.SplicePart.Pattern).
//
// A part of a blob may be chosen, besides by a JSON path, by a pattern: a
// regular expression with exactly one capture group, run by the kernel
// over a text (the string at the path, or with no path the blob's text),
// so that a value inside free text ("Pay to: GB33...") can be spliced by
// reference, bound to where it came from, as a JSON field can. The part is
// the capture of the pattern's one match, as a JSON string, and carries
// the label of the text it was taken from (Blob.PartLabel of the path; the
// whole blob's label with no path).
//
// One match, not the first: the text is usually written by someone the
// person does not control (the small print of a bill), who could put a
// match of their own before the real one. With one match required, such a
// text makes the part fail (EINVAL), never choose another value.
//
// RE2 semantics (Go's regexp) make a match cost time linear in the text;
// the pattern's length, its compiled program and the text scanned are
// bounded (abi.MaxPatternLen, maxPatternInsts, abi.MaxPatternText, and
// their product MaxPatternCost) so one part costs a bounded amount of
// kernel time whatever the guest asks.
//
// Whether a pattern matched once is something the caller learns about a
// text it did not read (a pattern can test one character at a time), so a
// pattern part raises the calling task's label by the text's
// confidentiality tags (Call.reveal), matched or not: a secret cannot be
// read out through patterns without the task being labelled by it. The
// integrity taints are not raised: which of its own patterns matched is
// the one bit a JSON path's existence also tells, and the task's
// decisions stay its own.

// maxPatternInsts bounds a compiled pattern's program (a counted repeat
// such as {11,30} is expanded, so a short pattern can be a large one).
const maxPatternInsts = 256

// MaxPatternCost bounds a pattern's program size times the bytes of text
// it scans. RE2 is linear in the text, but each byte can step every
// instruction of the program: a 200-instruction pattern made to keep all
// its threads alive takes seconds over 1 MiB. Bounding the product bounds
// one part's kernel time (BenchmarkPatternPartWorst: about a second at the
// bound) whatever the guest asks: a pattern of 16 instructions may scan
// 1 MiB, an IBAN's (about 70) some 240 KiB.
const MaxPatternCost = 1 << 24

// Pattern is a compiled part pattern (CompilePattern).
type Pattern struct {
	re    *regexp.Regexp
	insts int // the size of its program
}

// CompilePattern compiles a part's pattern: at most abi.MaxPatternLen bytes
// (ELIMIT), RE2 syntax with exactly one capture group (EINVAL), and a
// program of at most maxPatternInsts instructions (ELIMIT).
func CompilePattern(s string) (*Pattern, error) {
	if len(s) > abi.MaxPatternLen {
		return nil, Errorf(abi.ELIMIT, "pattern of %d bytes (at most %d)", len(s), abi.MaxPatternLen)
	}
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return nil, Errorf(abi.EINVAL, "pattern %s: %v", quoteShort(s), err)
	}
	if n := re.MaxCap(); n != 1 {
		return nil, Errorf(abi.EINVAL, "pattern %s has %d capture groups: a part's pattern has exactly one, the part", quoteShort(s), n)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, Errorf(abi.EINVAL, "pattern %s: %v", quoteShort(s), err)
	}
	if len(prog.Inst) > maxPatternInsts {
		return nil, Errorf(abi.ELIMIT, "pattern %s compiles to %d instructions (at most %d)", quoteShort(s), len(prog.Inst), maxPatternInsts)
	}
	rx, err := regexp.Compile(s)
	if err != nil {
		return nil, Errorf(abi.EINVAL, "pattern %s: %v", quoteShort(s), err)
	}
	return &Pattern{re: rx, insts: len(prog.Inst)}, nil
}

// MatchOne returns the capture of re's one match in text: no match, a
// second match, a capture group that took no part in the match or a
// capture that is not valid UTF-8 is EINVAL; a text over
// abi.MaxPatternText bytes is ELIMIT, unscanned.
func MatchOne(p *Pattern, text []byte) ([]byte, error) {
	re := p.re
	if len(text) > abi.MaxPatternText {
		return nil, Errorf(abi.ELIMIT, "pattern %s: a text of %d bytes (a pattern scans at most %d)", quoteShort(re.String()), len(text), abi.MaxPatternText)
	}
	if n := p.insts; n*len(text) > MaxPatternCost {
		return nil, Errorf(abi.ELIMIT, "pattern %s: %d instructions over a text of %d bytes (their product at most %d: a simpler pattern, or a path to a shorter text)",
			quoteShort(re.String()), n, len(text), MaxPatternCost)
	}
	m := re.FindAllSubmatchIndex(text, 2)
	switch {
	case len(m) == 0:
		return nil, Errorf(abi.EINVAL, "pattern %s matches nothing", quoteShort(re.String()))
	case len(m) > 1:
		return nil, Errorf(abi.EINVAL, "pattern %s matches more than once: a part is one value (anchor it, e.g. (?m)^Name: (...)$)", quoteShort(re.String()))
	case m[0][2] < 0:
		return nil, Errorf(abi.EINVAL, "pattern %s matched, but its capture group took no part in the match", quoteShort(re.String()))
	}
	c := text[m[0][2]:m[0][3]]
	if !utf8.Valid(c) {
		return nil, Errorf(abi.EINVAL, "pattern %s: the capture is not valid UTF-8", quoteShort(re.String()))
	}
	return c, nil
}

// quoteShort quotes a pattern for an error, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Text is b's text, for a pattern with no path: the body of an HTTP
// response blob (a net fetch's result), b's bytes otherwise. It aliases b
// (read only).
func (b *Blob) Text() []byte {
	if bytes.HasPrefix(b.data, []byte("MHR1")) {
		if resp, err := abi.DecodeHTTPResponse(b.data); err == nil {
			return resp.Body
		}
	}
	return b.data
}

// Part returns the part of b that path and pattern name (as
// abi.SplicePart does): a new blob of its JSON value, compacted (with a
// pattern, the capture as a JSON string), labelled with that part's label
// (PartLabel of the path; b's Label with no path), written when b is. The
// errors are EINVAL (no path and no pattern, a bad path, no such value, a
// pattern's value that is not a string, what MatchOne refuses) and ELIMIT
// (what CompilePattern and MatchOne bound).
//
// When a pattern was run, revealed is the label of the text it scanned,
// whether it matched or not: what the caller learnt something of.
func (b *Blob) Part(path, pattern string) (part *Blob, revealed Label, err error) {
	if path == "" && pattern == "" {
		return nil, Label{}, Errorf(abi.EINVAL, "a part needs a path, a pattern or both")
	}
	var re *Pattern
	if pattern != "" {
		if re, err = CompilePattern(pattern); err != nil {
			return nil, Label{}, err
		}
	}
	var text []byte
	label := b.label
	if path != "" {
		p, err := ParsePath(path, false)
		if err != nil {
			return nil, Label{}, Errorf(abi.EINVAL, "%v", err)
		}
		doc, err := b.JSONDocument()
		if err != nil {
			return nil, Label{}, err
		}
		v, err := p.Extract(doc)
		if err != nil {
			return nil, Label{}, Errorf(abi.EINVAL, "part: %v", err)
		}
		label = b.PartLabel(p)
		if re == nil {
			return b.derive(v, label), Label{}, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, Label{}, Errorf(abi.EINVAL, "part: %s is not a string, and a pattern reads text", p)
		}
		text = []byte(s)
	} else {
		text = b.Text()
	}
	revealed = Label{conf: label.conf}
	c, err := MatchOne(re, text)
	if err != nil {
		return nil, revealed, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(c)) // valid UTF-8: cannot fail
	return b.derive(bytes.TrimSuffix(out.Bytes(), []byte("\n")), label), revealed, nil
}

// derive is a blob of data, a part of b: labelled label, written when b
// is.
func (b *Blob) derive(data []byte, label Label) *Blob {
	p := NewBlobOwned(data, label)
	p.written = b.written
	return p
}
