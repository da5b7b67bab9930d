package abi

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth bounds how deeply arrays and objects nest in a document
// CheckJSON accepts. It is encoding/json's own limit, so CheckJSON and the
// decoders behind it refuse the same nesting.
const MaxJSONDepth = 10000

// CheckJSON reports whether b is one JSON value (with optional white space
// around it) that every reader reads alike. Beyond RFC 8259's grammar it
// refuses
//
//   - an object with a key given twice at any depth, comparing keys after
//     unescaping ("a" and "\u0061" are the same key): one reader takes
//     the first value, another the last;
//   - a string, key or value, that is not valid UTF-8 after unescaping,
//     including a lone surrogate escape such as "\ud800": encoding/json
//     silently reads either as U+FFFD, another reader keeps the bytes or
//     refuses;
//   - nesting deeper than MaxJSONDepth.
//
// Errors wrap ErrMalformed and name where the problem is as a path from
// the document's root, $, for example
//
//	abi: malformed document: duplicate key "amount" in object at $.offer
//
// CheckJSON scans b once without recursion; its memory is the keys of the
// objects open at any moment. It does not bound len(b): DecodeJSON and
// DecodeJSONNumber, which call it, do; a kind checking a larger document,
// such as a request body, bounds it itself.
func CheckJSON(b []byte) error {
	c := checker{b: b}
	return c.run()
}

type checker struct {
	b     []byte
	i     int
	stack []frame
	key   []byte // scratch for unescaping keys
}

// frame is an open array or object.
type frame struct {
	obj   bool
	keys  map[string]struct{} // the keys seen so far (objects)
	key   string              // the key of the value being read (objects)
	index int                 // the index of the value being read (arrays)
}

const (
	stValue = iota // a value is expected
	stKey          // an object key is expected
	stAfter        // a value has been read
)

func (c *checker) run() error {
	st := stValue
	for {
		switch st {
		case stValue:
			c.ws()
			if c.i >= len(c.b) {
				return c.syntax("unexpected end of document")
			}
			switch ch := c.b[c.i]; {
			case ch == '{' || ch == '[':
				if len(c.stack) >= MaxJSONDepth {
					return fmt.Errorf("%w: nesting deeper than %d at %s", ErrMalformed, MaxJSONDepth, c.path(len(c.stack)))
				}
				c.i++
				c.stack = append(c.stack, frame{obj: ch == '{'})
				c.ws()
				end := byte(']')
				if ch == '{' {
					end = '}'
				}
				switch {
				case c.i < len(c.b) && c.b[c.i] == end:
					c.i++
					c.stack = c.stack[:len(c.stack)-1]
					st = stAfter
				case ch == '{':
					st = stKey
				default:
					st = stValue
				}
			case ch == '"':
				if err := c.str(false); err != nil {
					return err
				}
				st = stAfter
			case ch == '-' || ch >= '0' && ch <= '9':
				if err := c.number(); err != nil {
					return err
				}
				st = stAfter
			case ch == 't':
				if err := c.literal("true"); err != nil {
					return err
				}
				st = stAfter
			case ch == 'f':
				if err := c.literal("false"); err != nil {
					return err
				}
				st = stAfter
			case ch == 'n':
				if err := c.literal("null"); err != nil {
					return err
				}
				st = stAfter
			default:
				return c.syntax(fmt.Sprintf("unexpected %q where a value should be", ch))
			}

		case stKey:
			c.ws()
			if c.i >= len(c.b) || c.b[c.i] != '"' {
				return c.syntax("an object key should be a string")
			}
			if err := c.str(true); err != nil {
				return err
			}
			top := &c.stack[len(c.stack)-1]
			if _, dup := top.keys[string(c.key)]; dup {
				return fmt.Errorf("%w: duplicate key %q in object at %s", ErrMalformed, c.key, c.path(len(c.stack)-1))
			}
			if top.keys == nil {
				top.keys = map[string]struct{}{}
			}
			top.key = string(c.key)
			top.keys[top.key] = struct{}{}
			c.ws()
			if c.i >= len(c.b) || c.b[c.i] != ':' {
				return c.syntax("expected ':' after an object key")
			}
			c.i++
			st = stValue

		case stAfter:
			c.ws()
			if len(c.stack) == 0 {
				if c.i != len(c.b) {
					return fmt.Errorf("%w: trailing data at offset %d", ErrMalformed, c.i)
				}
				return nil
			}
			top := &c.stack[len(c.stack)-1]
			end := byte(']')
			if top.obj {
				end = '}'
			}
			switch {
			case c.i >= len(c.b):
				return c.syntax("unexpected end of document")
			case c.b[c.i] == ',':
				c.i++
				if top.obj {
					st = stKey
				} else {
					top.index++
					st = stValue
				}
			case c.b[c.i] == end:
				c.i++
				c.stack = c.stack[:len(c.stack)-1]
			default:
				return c.syntax(fmt.Sprintf("unexpected %q after a value", c.b[c.i]))
			}
		}
	}
}

func (c *checker) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *checker) syntax(msg string) error {
	return fmt.Errorf("%w: invalid JSON at offset %d: %s", ErrMalformed, c.i, msg)
}

func (c *checker) literal(s string) error {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return c.syntax("invalid literal (want " + s + ")")
	}
	c.i += len(s)
	return nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (c *checker) number() error {
	digits := func() int {
		n := 0
		for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	if c.b[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.b) && c.b[c.i] == '0':
		c.i++
	case digits() == 0:
		return c.syntax("a number needs digits")
	}
	if c.i < len(c.b) && c.b[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return c.syntax("a number needs digits after '.'")
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		c.i++
		if c.i < len(c.b) && (c.b[c.i] == '+' || c.b[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return c.syntax("a number needs digits in its exponent")
		}
	}
	return nil
}

// str reads the string at c.i (which is '"'). A key is left unescaped in
// c.key.
func (c *checker) str(isKey bool) error {
	what := "string"
	if isKey {
		what = "key"
	}
	bad := func(format string, args ...any) error {
		// A key's path is its object's; a value's includes its own key.
		at := c.path(len(c.stack))
		if isKey {
			at = c.path(len(c.stack) - 1)
		}
		return fmt.Errorf("%w: %s in %s at %s (offset %d)", ErrMalformed, fmt.Sprintf(format, args...), what, at, c.i)
	}
	c.key = c.key[:0]
	c.i++ // the opening quote
	for {
		if c.i >= len(c.b) {
			return c.syntax("unterminated " + what)
		}
		ch := c.b[c.i]
		switch {
		case ch == '"':
			c.i++
			return nil
		case ch < 0x20:
			return bad("control character %#02x", ch)
		case ch == '\\':
			if c.i+1 >= len(c.b) {
				return c.syntax("unterminated " + what)
			}
			var r rune
			switch e := c.b[c.i+1]; e {
			case '"', '\\', '/':
				r = rune(e)
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				u, ok := c.hex4(c.i + 2)
				if !ok {
					return c.syntax(`a \u escape needs four hex digits`)
				}
				r = u
				if utf16.IsSurrogate(u) {
					lo, ok := rune(-1), false
					if u < 0xdc00 && c.i+7 < len(c.b) && c.b[c.i+6] == '\\' && c.b[c.i+7] == 'u' {
						lo, ok = c.hex4(c.i + 8)
					}
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return bad(`lone surrogate escape \u%04x`, u)
					}
					r = utf16.DecodeRune(u, lo)
					c.i += 6
				}
				c.i += 4
			default:
				return c.syntax(fmt.Sprintf("invalid escape %q", "\\"+string(rune(e))))
			}
			c.i += 2
			if isKey {
				c.key = utf8.AppendRune(c.key, r)
			}
		case ch < utf8.RuneSelf:
			c.i++
			if isKey {
				c.key = append(c.key, ch)
			}
		default:
			r, n := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError && n == 1 {
				return bad("invalid UTF-8 byte %#02x", ch)
			}
			if isKey {
				c.key = append(c.key, c.b[c.i:c.i+n]...)
			}
			c.i += n
		}
	}
}

func (c *checker) hex4(at int) (rune, bool) {
	if at+4 > len(c.b) {
		return 0, false
	}
	var r rune
	for _, h := range c.b[at : at+4] {
		switch {
		case h >= '0' && h <= '9':
			h -= '0'
		case h >= 'a' && h <= 'f':
			h -= 'a' - 10
		case h >= 'A' && h <= 'F':
			h -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// path names the value being read in the first n open frames: $, then
// .key (or ["key"] when the key is not an identifier) or [index] per
// frame.
func (c *checker) path(n int) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, f := range c.stack[:n] {
		switch {
		case !f.obj:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
		case isIdent(f.key):
			b.WriteByte('.')
			b.WriteString(f.key)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(f.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
