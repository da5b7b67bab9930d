package constraint

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Text: the values inside free text.
//
// Three functions find, in a string, the values a message could carry to
// somewhere the person did not mean it to go:
//
//	urls(s)     the URLs in s: each "scheme://..." (http, https, ftp or any
//	            other scheme) or "www...." run, as found, with its scheme
//	            and host lowercased; it ends at a space, a control
//	            character or one of <>"'`{}|\^, and trailing punctuation
//	            (.,;:!?) and an unmatched ")" or "]" are not part of it
//	emails(s)   the e-mail addresses in s (a "mailto:" link's too),
//	            lowercased: local@domain (either in any script) with a
//	            dotted domain whose last label has two letters or more
//	ibans(s)    the IBAN-like strings in s: two letters, two digits and
//	            11 to 30 letters or digits, in one run or in groups
//	            separated by single spaces, whose mod-97 checksum holds
//	            (ISO 13616; a random string passes one time in 97), without
//	            spaces and uppercased
//
// each returning a list(string), every value once, in the order of its
// first appearance; and two predicates on such a value (given and seen,
// seen.go). So a message's links can be bound to the person's request:
//
//	urls(request.body.text).all(u, given(u))
//
// Hosts are compared as written: an internationalised host is lowercased
// (Unicode's rules) but not converted to or from its xn-- (punycode)
// form, so the two forms of one host are two values (a policy comparing
// them refuses, never allows, the other form). Bare host names without
// "www." or a scheme ("evil.example/x") are not URLs, nor are forms
// without "//" ("https:/x", "javascript:..."). The scheme is the letters,
// digits, "+", "-" and "." before "://", from a letter, ending in a letter
// or digit, at most 32 bytes; "www." must start a word (not follow a
// letter, digit, ".", "-", "_", "/" or "@"). An e-mail address whose
// local part is over 64 bytes or whose domain is over 253 is an error,
// as too long a value is: never cut to a shorter address.
//
// Bounds. A string longer than MaxTextLen bytes, or holding more than
// MaxTextValues distinct values of the kind asked for, or a value longer
// than MaxValueLen, is an evaluation error, which denies the call: the
// functions never answer from part of their input. Each call costs, in
// CEL's units, one per ten bytes of its input (as CEL's own string
// scans), plus the list it makes; the cost estimator knows it, so an
// expression scanning a large body meets the cost limit (DefaultCostLimit:
// a string of about 900 KiB).
const (
	// MaxTextLen bounds the string a text function scans.
	MaxTextLen = 1 << 20
	// MaxTextValues bounds the distinct values one call returns.
	MaxTextValues = 1000
	// MaxValueLen bounds one value (a URL, an address, an IBAN).
	MaxValueLen = 4096
)

// The overloads of the text functions.
const (
	urlsString   = "urls_string"
	emailsString = "emails_string"
	ibansString  = "ibans_string"
)

// textOptions declares urls, emails and ibans and their cost: a scan of
// the string plus a list of at most MaxTextValues strings, each no longer
// than the input.
func textOptions() []cel.EnvOption {
	strs := cel.ListType(cel.StringType)
	fn := func(name, id string, find func(string) ([]string, error)) cel.EnvOption {
		return cel.Function(name, cel.Overload(id, []*cel.Type{cel.StringType}, strs,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				out, err := find(string(s))
				if err != nil {
					return types.NewErr("%s: %v", name, err)
				}
				return types.DefaultTypeAdapter.NativeToValue(out)
			})))
	}
	model := func(id string) cost.OverloadModel {
		return cost.Overload(id,
			cost.EvalCost(cost.AllocList(cost.StringScan(cost.Arg(0)), cost.Length(cost.Result()))),
			cost.ResultSize(cost.List(cost.Min(cost.Arg(0), cost.Const(MaxTextValues)), cost.Arg(0))))
	}
	return []cel.EnvOption{
		fn("urls", urlsString, URLs),
		fn("emails", emailsString, Emails),
		fn("ibans", ibansString, IBANs),
		cel.CostModel(model(urlsString), model(emailsString), model(ibansString)),
	}
}

// URLs returns the URLs in s, as urls(s) does in an expression.
func URLs(s string) ([]string, error) { return find(s, scanURLs) }

// Emails returns the e-mail addresses in s, as emails(s) does.
func Emails(s string) ([]string, error) { return find(s, scanEmails) }

// IBANs returns the IBAN-like strings in s, as ibans(s) does.
func IBANs(s string) ([]string, error) { return find(s, scanIBANs) }

// errTooMany stops a scan past MaxTextValues distinct values.
type errTooMany struct{}

func (errTooMany) Error() string {
	return fmt.Sprintf("more than %d distinct values (the call is refused rather than judged on part of them)", MaxTextValues)
}

// collector gathers distinct values, in order, up to a bound.
type collector struct {
	out  []string
	seen map[string]struct{}
	max  int
	err  error
}

// add records v; it reports false when the scan must stop.
func (c *collector) add(v string) bool {
	if c.err != nil {
		return false
	}
	if len(v) > MaxValueLen {
		c.err = fmt.Errorf("a value of %d bytes (at most %d)", len(v), MaxValueLen)
		return false
	}
	if _, ok := c.seen[v]; ok {
		return true
	}
	if len(c.out) == c.max {
		c.err = errTooMany{}
		return false
	}
	if c.seen == nil {
		c.seen = map[string]struct{}{}
	}
	c.seen[v] = struct{}{}
	c.out = append(c.out, v)
	return true
}

func find(s string, scan func(string, *collector)) ([]string, error) {
	if len(s) > MaxTextLen {
		return nil, fmt.Errorf("a string of %d bytes (at most %d)", len(s), MaxTextLen)
	}
	c := collector{out: []string{}, max: MaxTextValues}
	scan(s, &c)
	if c.err != nil {
		return nil, c.err
	}
	return c.out, nil
}

// FindValues returns the URLs, e-mail addresses and IBANs in s, at most
// max of them, and whether there were more (or a value too long to keep):
// what the kernel records of what a task reads (kernel.ValueFinder).
func FindValues(s string, max int) (vals []string, more bool) {
	c := collector{max: max}
	scanURLs(s, &c)
	scanEmails(s, &c)
	scanIBANs(s, &c)
	return c.out, c.err != nil
}

// canonical is v as the text functions would return it when v is one
// value (a URL, an address, a "mailto:" link or an IBAN, however
// spaced or cased), else v itself: what given and seen compare.
func canonical(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > MaxValueLen {
		return v
	}
	squash := strings.ReplaceAll(v, " ", "")
	for _, scan := range []func(string, *collector){scanURLs, scanEmails, scanIBANs} {
		c := collector{max: 2}
		scan(v, &c)
		if c.err != nil || len(c.out) != 1 {
			continue
		}
		if u := c.out[0]; strings.EqualFold(squash, u) || strings.EqualFold(v, "mailto:"+u) {
			return u
		}
	}
	return v
}

// URLs.

// isSchemeByte reports whether b may be in a URL scheme (RFC 3986).
func isSchemeByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '+' || b == '-' || b == '.'
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
func isDigit(b byte) bool  { return b >= '0' && b <= '9' }
func isAlnum(b byte) bool  { return isLetter(b) || isDigit(b) }

// maxScheme bounds how far back a scheme is looked for.
const maxScheme = 32

// urlEnd returns where the URL starting at s[i:] (after its scheme or
// its "www.") ends: at a space, a control character or a delimiter.
func urlEnd(s string, i int) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if b <= ' ' || b == 0x7f || strings.IndexByte("<>\"'`{}|\\^", b) >= 0 {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || unicode.IsSpace(r) || unicode.IsControl(r) {
			return i
		}
		i += n
	}
	return i
}

// trimURL drops trailing punctuation and an unmatched closing bracket.
// It counts the brackets once: linear however many it drops.
func trimURL(u string) string {
	open := [2]int{strings.Count(u, "("), strings.Count(u, "[")}
	closed := [2]int{strings.Count(u, ")"), strings.Count(u, "]")}
	for u != "" {
		switch b := u[len(u)-1]; b {
		case '.', ',', ';', ':', '!', '?':
			u = u[:len(u)-1]
			continue
		case ')', ']':
			i := 0
			if b == ']' {
				i = 1
			}
			if open[i] < closed[i] {
				closed[i]--
				u = u[:len(u)-1]
				continue
			}
		}
		return u
	}
	return u
}

// normURL lowercases u's scheme and host (its authority after any
// user information); start is where the authority begins.
func normURL(u string, start int) string {
	end := len(u)
	if k := strings.IndexAny(u[start:], "/?#"); k >= 0 {
		end = start + k
	}
	host := start
	if k := strings.LastIndexByte(u[start:end], '@'); k >= 0 {
		host = start + k + 1
	}
	lower := func(s string) string {
		if !hasUpper(s) {
			return s
		}
		return strings.ToLower(s)
	}
	scheme := lower(u[:start])
	h := lower(u[host:end])
	if len(scheme) == start && len(h) == end-host && scheme == u[:start] && h == u[host:end] {
		return u
	}
	return scheme + u[start:host] + h + u[end:]
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b >= 'A' && b <= 'Z' || b >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

func scanURLs(s string, c *collector) {
	from := 0    // the search resumes here
	lastEnd := 0 // the end of the last URL found: a scheme starts after it
	starts := urlStarts{s: s}
	for from < len(s) {
		at := starts.next(from)
		if at < 0 {
			return
		}
		var start, auth int // the URL's start and its authority's
		if s[at] == ':' {   // "://" at at
			start = at
			for start > lastEnd && at-start < maxScheme && isSchemeByte(s[start-1]) {
				start--
			}
			for start < at && !isLetter(s[start]) {
				start++
			}
			auth = at + 3
			// A scheme ends with a letter or a digit ("www.://" is
			// not one).
			if start == at || !isAlnum(s[at-1]) {
				from = at + 3
				continue
			}
		} else { // "www." at at
			start, auth = at, at
		}
		end := urlEnd(s, auth)
		u := trimURL(s[start:end])
		if s[at] != ':' && (len(u) <= 4 || !strings.Contains(u[4:], ".")) {
			from = at + 4 // not a host: a "://" after it may still start a URL
			continue
		}
		if len(u) <= auth-start { // no host
			from = at + 3
			continue
		}
		if !c.add(normURL(u, auth-start)) {
			return
		}
		from, lastEnd = max(end, at+3), max(end, at+3)
	}
}

// urlStarts finds where URLs may start: each "://", and each "www." that
// starts a word. It remembers the next "://" it found, so that a scan
// searches each byte a bounded number of times however many candidates
// it meets.
type urlStarts struct {
	s      string
	sep    int  // the index of the next "://" not yet passed; -1: none
	search bool // sep was searched for
}

// next returns the index of the first candidate at or after from; -1 if
// none.
func (u *urlStarts) next(from int) int {
	s := u.s
	if !u.search || (u.sep >= 0 && u.sep < from) {
		u.search, u.sep = true, -1
		if k := strings.Index(s[from:], "://"); k >= 0 {
			u.sep = from + k
		}
	}
	limit := len(s)
	if u.sep >= 0 {
		limit = u.sep
	}
	// A "www." before it: look at each dot (IndexByte is fast).
	for p := from; p < limit; {
		q := strings.IndexByte(s[p:limit], '.')
		if q < 0 {
			break
		}
		q += p
		if i := q - 3; i >= from && len(s)-i >= 5 && strings.EqualFold(s[i:q], "www") && (i == 0 || !isWordByte(s[i-1])) {
			return i
		}
		p = q + 1
	}
	return u.sep
}

func isWordByte(b byte) bool {
	return isAlnum(b) || b == '.' || b == '-' || b == '_' || b == '/' || b == '@' || b >= utf8.RuneSelf
}

// E-mail addresses.

const (
	maxLocal  = 64
	maxDomain = 253
)

func isLocalByte(b byte) bool {
	return isAlnum(b) || strings.IndexByte(".!#$%&*+/=?^_`{|}~-", b) >= 0
}

func scanEmails(s string, c *collector) {
	from := 0
	for from < len(s) {
		k := strings.IndexByte(s[from:], '@')
		if k < 0 {
			return
		}
		at := from + k
		next := at + 1
		// The local part: RFC 5322's atoms and, as RFC 6531 allows,
		// letters and digits of any script; not starting with a dot or
		// a slash (as after "https://") nor ending with a dot.
		start := at
		for start > from {
			if b := s[start-1]; b < utf8.RuneSelf {
				if !isLocalByte(b) {
					break
				}
				start--
				continue
			}
			r, n := utf8.DecodeLastRuneInString(s[from:start])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) {
				break
			}
			start -= n
		}
		for start < at && (s[start] == '.' || s[start] == '/') {
			start++
		}
		// The domain: letters (any script), digits, dots and hyphens.
		end := at + 1
		for end < len(s) {
			b := s[end]
			if isAlnum(b) || b == '.' || b == '-' {
				end++
				continue
			}
			if b >= utf8.RuneSelf {
				r, n := utf8.DecodeRuneInString(s[end:])
				if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) {
					end += n
					continue
				}
			}
			break
		}
		domain := strings.TrimRight(s[at+1:end], ".-")
		if start < at && s[at-1] != '.' && validDomain(domain) {
			// Longer than RFC 5321 allows: refused, never cut to a
			// shorter address that another could share.
			if at-start > maxLocal || len(domain) > maxDomain {
				c.err = fmt.Errorf("an e-mail address of %d bytes before and %d after its @ (at most %d and %d)", at-start, len(domain), maxLocal, maxDomain)
				return
			}
			if !c.add(strings.ToLower(s[start:at+1] + domain)) {
				return
			}
			next = at + 1 + len(domain)
		}
		from = next
	}
}

// validDomain: dotted labels, none empty or starting or ending with a
// hyphen, the last of two letters or more.
func validDomain(d string) bool {
	if !strings.Contains(d, ".") {
		return false
	}
	labels := strings.Split(d, ".")
	for _, l := range labels {
		if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
	}
	tld := labels[len(labels)-1]
	if utf8.RuneCountInString(tld) < 2 {
		return false
	}
	for _, r := range tld {
		if !unicode.IsLetter(r) && !unicode.Is(unicode.Mn, r) && !(r == '-' || r >= '0' && r <= '9') {
			return false
		}
	}
	return unicode.IsLetter([]rune(tld)[0])
}

// IBANs.

const (
	minIBAN = 15
	maxIBAN = 34
)

func scanIBANs(s string, c *collector) {
	var buf [maxIBAN]byte
	for i := 0; i+4 <= len(s); i++ {
		// Digits first: rare in prose, so most bytes cost one test.
		if !isDigit(s[i+2]) || !isDigit(s[i+3]) || !isLetter(s[i]) || !isLetter(s[i+1]) || (i > 0 && isAlnum(s[i-1])) {
			continue
		}
		// Collect letters and digits, single spaces between groups,
		// noting where each group ends (a candidate end).
		n, j := 0, i
		var ends [maxIBAN + 1]struct{ n, j int } // compact length, end in s
		m := 0
		for j < len(s) && n < maxIBAN {
			if isAlnum(s[j]) {
				buf[n] = upper(s[j])
				n++
				j++
				if j == len(s) || !isAlnum(s[j]) {
					ends[m] = struct{ n, j int }{n, j}
					m++
				}
				continue
			}
			if s[j] == ' ' && j+1 < len(s) && isAlnum(s[j+1]) && j > i {
				j++
				continue
			}
			break
		}
		// The longest candidate ending at a word's end with a valid
		// checksum.
		for k := m - 1; k >= 0; k-- {
			e := ends[k]
			if e.n < minIBAN || (e.j < len(s) && isAlnum(s[e.j])) {
				continue
			}
			if ibanChecksum(buf[:e.n]) {
				if !c.add(string(buf[:e.n])) {
					return
				}
				i = e.j - 1
				break
			}
		}
	}
}

func upper(b byte) byte {
	if b >= 'a' && b <= 'z' {
		return b - 'a' + 'A'
	}
	return b
}

// ibanChecksum: the first four characters moved to the end, letters as
// 10..35, the number mod 97 is 1. b is uppercase letters and digits.
func ibanChecksum(b []byte) bool {
	if !isLetter(b[0]) || !isLetter(b[1]) || !isDigit(b[2]) || !isDigit(b[3]) {
		return false
	}
	r := 0
	step := func(ch byte) {
		if isDigit(ch) {
			r = (r*10 + int(ch-'0')) % 97
		} else {
			r = (r*100 + int(ch-'A') + 10) % 97
		}
	}
	for _, ch := range b[4:] {
		step(ch)
	}
	for _, ch := range b[:4] {
		step(ch)
	}
	return r == 1
}
