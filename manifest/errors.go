package manifest

// Errors: Error, a list of positioned problems, one FILE:LINE,COL: line
// each, and the helpers that position them.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Error is a list of positioned problems in a manifest. Its message has one
// line per problem: FILE:LINE,COL: message.
type Error struct {
	Diags hcl.Diagnostics
	// Policy is set when the file is an MCP policy (session and tool
	// blocks) given where a task manifest was expected: a caller that
	// takes either (mandate check) loads it as a policy instead.
	Policy bool
}

func (e *Error) Error() string {
	var lines []string
	for _, d := range e.Diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		lines = append(lines, formatDiag(d))
	}
	if len(lines) == 0 {
		return "manifest: unknown error"
	}
	return strings.Join(lines, "\n")
}

func formatDiag(d *hcl.Diagnostic) string {
	msg := d.Summary
	if d.Detail != "" {
		msg += ": " + d.Detail
	}
	if d.Subject == nil {
		return msg
	}
	return fmt.Sprintf("%s:%d,%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, msg)
}

func diagErr(rng hcl.Range, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
}

func posString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

// bodyContent is body.Content(schema) with its diagnostics in file order: HCL
// reports the arguments a block does not expect in the order of a map, so
// the same text would otherwise give its errors in a different order each
// time (FuzzParsePolicy found it).
func bodyContent(body hcl.Body, schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, diags := body.Content(schema)
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a != nil && b == nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		case a.Start.Line != b.Start.Line:
			return a.Start.Line < b.Start.Line
		}
		return a.Start.Column < b.Start.Column
	})
	return c, diags
}
