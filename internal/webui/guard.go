package webui

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ContentSecurityPolicy is sent with every response: scripts, styles,
// images and connections from this origin only, nothing inline (no
// 'unsafe-inline': a string that reached the DOM as markup still could
// not run), no plugins, no base or form targets, and no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// guard is what every request passes before the handlers: the headers
// every response carries, the Host check (DNS rebinding), GET and HEAD
// only (but a POST of an approval's answer or of a client's reset,
// checked further by answerAllowed), and the token.
type guard struct {
	hosts  map[string]bool // Host headers served, lower case
	token  []byte
	cookie string // the cookie's name: per port, as cookies ignore ports
}

func newGuard(addr, token string) (*guard, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("webui: address %q: %v", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("webui: address %q is not a loopback IP and port", addr)
	}
	g := &guard{hosts: map[string]bool{}, token: []byte(token), cookie: "mandate_ui_" + port}
	for _, h := range []string{ip.String(), "localhost"} {
		g.hosts[strings.ToLower(net.JoinHostPort(h, port))] = true
		if port == "80" {
			g.hosts[h] = true // a browser leaves out the default port
		}
	}
	return g, nil
}

// serve checks r and passes it to next, or refuses it.
func (g *guard) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	// A page on another site whose name was rebound to 127.0.0.1 sends
	// its own name: refused, whatever else it carries.
	if !g.hosts[strings.ToLower(r.Host)] {
		refuse(w, http.StatusForbidden, "forbidden: this server answers only to its own loopback address")
		return
	}
	// Two paths take a POST (an approval's answer, a client's reset) and
	// nothing else; every other takes GET and HEAD only.
	post := answerPath(r.URL.Path) || resetPath(r.URL.Path)
	switch {
	case post && r.Method != http.MethodPost:
		h.Set("Allow", "POST")
		refuse(w, http.StatusMethodNotAllowed, "method not allowed: an approval is answered, a client reset, by its page's buttons (POST)")
		return
	case !post && r.Method != http.MethodGet && r.Method != http.MethodHead:
		h.Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed, "method not allowed: the UI only reads, but for an approval's answer and a client's reset")
		return
	}
	if tok, ok := r.URL.Query()["token"]; ok && !post {
		if len(tok) != 1 || !g.match(tok[0]) {
			refuse(w, http.StatusUnauthorized, "unauthorized: the token is wrong; open the URL mandate ui printed")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: string(g.token), Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode})
		// The same URL without the token: it leaves the address bar and
		// the history.
		q := r.URL.Query()
		q.Del("token")
		u := &url.URL{Path: localPath(r.URL.Path), RawQuery: q.Encode()}
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	if c, err := r.Cookie(g.cookie); err != nil || !g.match(c.Value) {
		refuse(w, http.StatusUnauthorized, "unauthorized: open the URL mandate ui printed (it carries the token)")
		return
	}
	if post && !g.answerAllowed(w, r) {
		return
	}
	next.ServeHTTP(w, r)
}

// answerAllowed checks what an approval's answer (or a client's reset)
// must carry besides the cookie, and refuses it otherwise: an Origin header that is this server's
// own (a page of another site cannot send it; a missing one is refused
// too), a Sec-Fetch-Site that is absent or same-origin, a JSON body (a
// cross-site form cannot send that type), of at most maxAnswerBody bytes.
// The cookie is SameSite=Strict already: these hold even where it is not
// honoured.
func (g *guard) answerAllowed(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Values("Origin")
	if len(origin) != 1 || !strings.EqualFold(origin[0], "http://"+r.Host) {
		refuse(w, http.StatusForbidden, "forbidden: an approval is answered, a client reset, only from this UI's own page (the request's Origin is not this server)")
		return false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		refuse(w, http.StatusForbidden, "forbidden: an approval is answered, a client reset, only from this UI's own page (Sec-Fetch-Site "+strconv.Quote(truncateText(site, 40))+")")
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		refuse(w, http.StatusUnsupportedMediaType, "unsupported media type: the request is JSON (Content-Type: application/json)")
		return false
	}
	if r.ContentLength > maxAnswerBody {
		refuse(w, http.StatusRequestEntityTooLarge, "request entity too large: an answer or a reset is a few bytes")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAnswerBody)
	return true
}

func truncateText(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return esc(s)
}

// match compares s with the token in constant time.
func (g *guard) match(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), g.token) == 1
}

// localPath is p if it is a path of this server, else "/": a redirect to
// "//host" or "/\host" would leave it.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return "/"
	}
	return p
}

// refuse writes a plain-text error.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}
