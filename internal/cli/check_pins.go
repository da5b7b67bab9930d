package cli

// mandate check --pins: the upstream tools each mcp capability of a
// manifest or policy allows, as their servers define them now, with the
// digest to pin. Unlike the rest of mandate check it reaches out: it
// starts each stdio server the grants name and connects to each URL, with
// the grants' secrets, as mandate run would.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mandatevm/mandate/caps/mcp"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
)

// pinsReport is one mcp capability's upstream tools.
type pinsReport struct {
	// Cap is the capability: its name in a manifest, TOOL.CAP in a
	// policy.
	Cap      string `json:"cap"`
	Upstream string `json:"upstream"`
	// Error is why the server's tools could not be listed.
	Error string     `json:"error,omitempty"`
	Tools []pinsTool `json:"tools"`
}

// pinsTool is one upstream tool the capability allows.
type pinsTool struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Pin    string `json:"pin,omitempty"`
	// Status is "pinned" (the definition is the one pinned), "not
	// pinned", or "changed" (pinned, but the server's definition is
	// another: calls are refused until it is pinned again).
	Status     string          `json:"status"`
	Definition json.RawMessage `json:"definition"`
}

// mcpCaps are the cap "mcp" blocks of a manifest or policy, named as the
// report names them, with the directory their grants resolve against.
type mcpCaps struct {
	name string
	caps []manifest.Cap
	dir  string
}

// checkPins lists the upstream tools of every mcp capability in sets and
// prints them. It returns exitTaskFailed when a tool is not pinned, was
// changed, or a server could not be listed: something to do before the
// capability works as its grant means.
func (e *env) checkPins(sets []mcpCaps, format string) int {
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	g := newCheckGranter(ks)
	var kind *mcp.Kind
	for _, k := range ks {
		if mk, ok := k.(*mcp.Kind); ok {
			kind = mk
		}
	}
	if kind == nil {
		e.errorf("this mandate has no mcp kind")
		return exitUsage
	}
	reports := []pinsReport{}
	code := exitOK
	for _, set := range sets {
		var caps []manifest.Cap
		for _, c := range set.caps {
			if c.Kind == mcp.KindName {
				caps = append(caps, c)
			}
		}
		if len(caps) == 0 {
			continue
		}
		// As mandate run grants them: secrets and the environment read.
		grants, err := manifest.GrantCaps(caps, set.dir, g, kindapi.GrantContext{Dir: set.dir})
		if err != nil {
			return e.manifestError(err)
		}
		for _, gr := range grants {
			r := pinsReport{Cap: gr.Name, Upstream: describeField(kind.Describe(gr.Scope), "upstream"), Tools: []pinsTool{}}
			if set.name != "" {
				r.Cap = host.SessionCapName(set.name, gr.Name)
			}
			defs, err := kind.Definitions(context.Background(), gr.Scope)
			if err != nil {
				r.Error = err.Error()
				code = exitTaskFailed
			}
			for _, d := range defs {
				t := pinsTool{Name: d.Name, Digest: d.Digest, Pin: d.Pin, Definition: d.Def, Status: "pinned"}
				switch {
				case d.Pin == "":
					t.Status, code = "not pinned", exitTaskFailed
				case !d.Pinned():
					t.Status, code = "changed", exitTaskFailed
				}
				r.Tools = append(r.Tools, t)
			}
			reports = append(reports, r)
		}
	}
	if format == "json" {
		if err := writeJSON(e.stdout, reports); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		return code
	}
	writePinsText(e.stdout, reports)
	return code
}

// describeField is the value of a kind's description's field name.
func describeField(d kindapi.Description, name string) string {
	for _, f := range d.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// writePinsText prints the reports for a person: each tool's status and
// definition (what its pin vouches for: read it before pinning), then the
// pins attribute that pins what the servers define now.
func writePinsText(w io.Writer, reports []pinsReport) {
	if len(reports) == 0 {
		fmt.Fprintln(w, "no cap \"mcp\" block")
		return
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "mcp %q: %s\n", r.Cap, kindapi.Printable(r.Upstream))
		if r.Error != "" {
			fmt.Fprintf(w, "  its tools could not be listed: %s\n", kindapi.Printable(r.Error))
			continue
		}
		if len(r.Tools) == 0 {
			fmt.Fprintln(w, "  the server offers no tool the grant's tools allow")
			continue
		}
		for _, t := range r.Tools {
			status := t.Status
			if t.Status == "changed" {
				status += " (pinned " + t.Pin + ")"
			}
			fmt.Fprintf(w, "  %s  %s  %s\n", kindapi.Printable(t.Name), t.Digest, status)
			var b bytes.Buffer
			if json.Indent(&b, t.Definition, "      ", "  ") == nil {
				fmt.Fprintf(w, "      %s\n", kindapi.EscapeText(b.String()))
			}
		}
		fmt.Fprintln(w, "  pins = {")
		for _, t := range r.Tools {
			fmt.Fprintf(w, "    %s = %q\n", hclKey(t.Name), t.Digest)
		}
		fmt.Fprintln(w, "  }")
	}
}

// hclKey is a tool's name as an HCL object key: bare when it is an
// identifier, quoted otherwise.
func hclKey(name string) string {
	if name != "" && strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 && !('0' <= name[0] && name[0] <= '9') && name[0] != '-' {
		return name
	}
	return fmt.Sprintf("%q", name)
}
