package mcp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

var pinA = "sha256:" + strings.Repeat("a", 64)

// TestGrantErrors: every malformed grant is a *kindapi.FieldError naming
// its field, with a message a person can act on.
func TestGrantErrors(t *testing.T) {
	k := New()
	for _, c := range []struct{ spec, field, msg string }{
		{`{"tools":["echo"]}`, "url", "required"},
		{`{"url":"https://a.example/mcp","command":["x"],"tools":["echo"]}`, "url", "not both"},
		{`{"url":"https://a.example/mcp"}`, "tools", "required"},
		{`{"url":"https://a.example/mcp","tools":[]}`, "tools", "at least one"},
		{`{"url":"https://a.example/mcp","tools":["a b"]}`, "tools", "without spaces"},
		{`{"url":"ftp://a.example/mcp","tools":["echo"]}`, "url", "scheme"},
		{`{"url":"https://u:p@a.example/mcp","tools":["echo"]}`, "url", "userinfo"},
		{`{"url":"http://127.0.0.1:9/mcp","tools":["echo"]}`, "url", "allow_private"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"env":["PATH"]}`, "env", "command"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"pins":{"other":"` + pinA + `"}}`, `pins["other"]`, "not among the tools"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"pins":{"echo":"md5:abc"}}`, `pins["echo"]`, "not a digest"},
		{`{"url":"https://a.example/mcp","tools":["e*"],"pins":{"e*":"` + pinA + `"}}`, `pins["e*"]`, "not a pattern"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"headers":[{"name":"Authorization","env":"NOPE"}]}`, "headers[0].env", "NOPE is not set"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"headers":[{"name":"Mcp-Session-Id","env":"MCP_TOKEN"}]}`, "headers[0].name", "MCP protocol"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"headers":[{"name":"X","env":"MCP_TOKEN"},{"name":"x","env":"MCP_TOKEN"}]}`, "headers[1].name", "twice"},
		{`{"command":["/nonexistent/server"],"tools":["echo"]}`, "command", "/nonexistent/server"},
		{`{"command":["no-such-program-mandate-test"],"tools":["echo"]}`, "command", "not found in PATH"},
		{`{"command":[],"tools":["echo"]}`, "command", "must name a program"},
		{`{"command":["sh"],"env":["NOT_SET_ANYWHERE"],"tools":["echo"]}`, "env", "NOT_SET_ANYWHERE is not set"},
		{`{"command":["sh"],"headers":[{"name":"A","env":"MCP_TOKEN"}],"tools":["echo"]}`, "headers", "url server"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"results":{"echo":{"taint":"a*"}}}`, `results["echo"].taint`, "refused-taint"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"results":{"echo":{"fields":{"x":"t"}}}}`, `results["echo"].fields["x"]`, "$"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"costs":{"echo":-1}}`, `costs["echo"]`, "must be in"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"timeout":"31m"}`, "timeout", "must be a duration"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"max_response_bytes":0}`, "max_response_bytes", "must be in"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"max_tools":0}`, "max_tools", "must be in"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"refuses_taints":["a*b"]}`, "refuses_taints", "may only end"},
		{`{"url":"https://a.example/mcp","tools":["echo"],"bogus":1}`, "bogus", "unknown field"},
	} {
		_, err := k.Grant(testGC, []byte(c.spec))
		var fe *kindapi.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a field error", c.spec, err)
			continue
		}
		if fe.Field != c.field || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%s: %s: %s, want %s: ...%s...", c.spec, fe.Field, fe.Msg, c.field, c.msg)
		}
		if strings.Contains(err.Error(), testSecret) {
			t.Errorf("%s: the error quotes the secret: %v", c.spec, err)
		}
	}
}

// TestGrantSecretsNotInJSON: the scope's JSON names where a header's
// value and a command's environment come from, never the values.
func TestGrantSecretsNotInJSON(t *testing.T) {
	k := New()
	s, err := k.Grant(testGC, []byte(`{"url":"https://a.example/mcp","tools":["echo"],
		"headers":[{"name":"authorization","env":"MCP_TOKEN","prefix":"Bearer "}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), testSecret) || !strings.Contains(string(b), `"source":"env:MCP_TOKEN"`) ||
		!strings.Contains(string(b), `"name":"Authorization"`) {
		t.Errorf("scope JSON %s", b)
	}
	// A file source.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = k.Grant(kindapi.GrantContext{Dir: dir}, []byte(`{"url":"https://a.example/mcp","tools":["echo"],
		"headers":[{"name":"X-Key","file":"token"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(s); strings.Contains(string(b), testSecret) || !strings.Contains(string(b), "file:token") {
		t.Errorf("scope JSON %s", b)
	}
	// A command's environment: names only.
	s, err = k.Grant(testGC, []byte(`{"command":["sh","-c","true"],"env":["MCP_TOKEN","VISIBLE"],"tools":["echo"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(s)
	if strings.Contains(string(b), testSecret) || strings.Contains(string(b), "shown-to-the-server") || !strings.Contains(string(b), `"env":["MCP_TOKEN","VISIBLE"]`) {
		t.Errorf("scope JSON %s", b)
	}
}

// TestGrantCommand: command[0] is resolved in mandate's PATH to an
// absolute path at grant time; the upstream is stdio: and its base name.
func TestGrantCommand(t *testing.T) {
	k := New()
	s, err := k.Grant(testGC, []byte(`{"command":["sh","-c","true"],"tools":["echo"],"dir":"."}`))
	if err != nil {
		t.Fatal(err)
	}
	sc := s.(*Scope)
	if !filepath.IsAbs(sc.command[0]) || filepath.Base(sc.command[0]) != "sh" || sc.command[1] != "-c" {
		t.Errorf("command %q", sc.command)
	}
	if !filepath.IsAbs(sc.dir) {
		t.Errorf("dir %q is not absolute", sc.dir)
	}
	if sc.Upstream() != "stdio:sh" || sc.Taint() != "mcp:stdio:sh" {
		t.Errorf("upstream %q taint %q", sc.Upstream(), sc.Taint())
	}
	// A relative PATH entry is never searched.
	gc := kindapi.GrantContext{LookupEnv: func(n string) (string, bool) { return ".", n == "PATH" }}
	if _, err := k.Grant(gc, []byte(`{"command":["sh"],"tools":["echo"]}`)); err == nil {
		t.Error("sh was found through a relative PATH entry")
	}
}

// TestGrantIdentity: grants of the same server share a connection key;
// another header value, command, environment or directory is another
// server; the url's path is part of the upstream's identity.
func TestGrantIdentity(t *testing.T) {
	k := New()
	key := func(spec string, env map[string]string) string {
		t.Helper()
		gc := kindapi.GrantContext{LookupEnv: func(n string) (string, bool) {
			if v, ok := env[n]; ok {
				return v, true
			}
			v, ok := testEnv[n]
			return v, ok
		}}
		s, err := k.Grant(gc, []byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		return s.(*Scope).key
	}
	h := `{"url":"https://a.example/mcp","tools":["%s"],"headers":[{"name":"A","env":"MCP_TOKEN"}]}`
	one := key(strings.Replace(h, "%s", "echo", 1), nil)
	if two := key(strings.Replace(h, "%s", "write", 1), nil); two != one {
		t.Error("two grants of one server (other tools) have different keys")
	}
	if other := key(strings.Replace(h, "%s", "echo", 1), map[string]string{"MCP_TOKEN": "another-token"}); other == one {
		t.Error("another header value shares the connection")
	}
	c := `{"command":["sh"],"env":["VISIBLE"],"tools":["echo"]}`
	if key(c, nil) == key(c, map[string]string{"VISIBLE": "other"}) {
		t.Error("another environment shares the process")
	}
	if key(c, nil) == key(`{"command":["sh"],"env":["VISIBLE"],"tools":["echo"],"dir":"/"}`, nil) {
		t.Error("another directory shares the process")
	}
	s, _ := k.Grant(testGC, []byte(`{"url":"HTTPS://A.example/mcp/","tools":["echo"]}`))
	if got := s.(*Scope).Upstream(); got != "https://a.example/mcp" {
		t.Errorf("upstream %q", got)
	}
}
