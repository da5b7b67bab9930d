package cli

// mandate check's report as text.

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
)

func writeCheckText(w io.Writer, m *manifest.Manifest, r *checkReport) {
	p := kindapi.Printable
	fmt.Fprintf(w, "task %q (%s)\n", p(r.Task.Name), p(m.Path))
	fmt.Fprintf(w, "  principal: %s\n", p(r.Task.Principal))
	if r.Task.Bounded {
		fmt.Fprintf(w, "  clearance: %s\n", tagSet(r.Task.Clearance))
	} else {
		fmt.Fprintf(w, "  clearance: unbounded\n")
	}
	if r.Task.Retry > 0 {
		if len(r.Task.NotRepeatable) == 0 {
			attempts := "attempts"
			if r.Task.Retry == 1 {
				attempts = "attempt"
			}
			fmt.Fprintf(w, "  retry: up to %d more %s when the fleet node running it is lost; every capability is repeatable\n", r.Task.Retry, attempts)
		} else {
			fmt.Fprintf(w, "  retry: a fleet node refuses this run, since these capabilities are not repeatable:\n")
			for _, n := range r.Task.NotRepeatable {
				fmt.Fprintf(w, "    %s\n", p(n))
			}
		}
	}

	hold := tagSet(r.CouldHold)
	if r.Unknown {
		hold += " plus unknown (unseeded data)"
	}
	fmt.Fprintf(w, "\ncould hold: %s\n", hold)
	for _, s := range r.Sources {
		writeCapLine(w, s.checkCap, p(s.Summary))
		switch {
		case s.Unknown:
			fmt.Fprintf(w, "    %s\n", p(s.Note))
		case s.Note != "":
			fmt.Fprintf(w, "    %s: %s\n", p(s.Note), tagSet(s.Tags))
		default:
			fmt.Fprintf(w, "    tags: %s\n", tagSet(s.Tags))
		}
		fs := make([]string, 0, len(s.LabelledFields))
		for f := range s.LabelledFields {
			fs = append(fs, f)
		}
		sort.Strings(fs)
		for _, f := range fs {
			fmt.Fprintf(w, "    %s: %s\n", p(f), tagSet(s.LabelledFields[f]))
		}
		if len(s.AboveClearance) > 0 {
			fmt.Fprintf(w, "    refused by the task's clearance: %s\n", tagSet(s.AboveClearance))
		}
	}

	fmt.Fprintf(w, "\nsinks:\n")
	if len(r.Sinks) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, s := range r.Sinks {
		head := fmt.Sprintf("clearance %s, accepts_untrusted %t", tagSet(s.Clearance), s.AcceptsUntrusted)
		if len(s.RefusesTaints) > 0 {
			head += ", refuses_taints " + tagSet(s.RefusesTaints)
		}
		if len(s.Reaches) > 0 {
			head = printableList(s.Reaches) + ", " + head
		}
		writeCapLine(w, s.checkCap, head)
		writeFields(w, s.Fields)
		fmt.Fprintf(w, "    could receive: %s\n", tagSet(s.CouldReceive))
		fmt.Fprintf(w, "    %s\n", s.Verdict)
	}

	writeCheckResult(w, r.Result)

	fmt.Fprintf(w, "\nspawn:\n")
	if len(r.Spawn) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, s := range r.Spawn {
		writeCapLine(w, s.checkCap, fieldsText(s.Fields))
		fmt.Fprintf(w, "    %s\n", s.Note)
	}

	if len(r.Declassify) > 0 {
		fmt.Fprintf(w, "\ndeclassify (lowers blobs the task hands on, never the task's own label):\n")
		for _, d := range r.Declassify {
			writeCapLine(w, d, fieldsText(d.Fields))
		}
	}

	if len(r.Other) > 0 {
		fmt.Fprintf(w, "\nother:\n")
		for _, c := range r.Other {
			writeCapLine(w, c, fieldsText(c.Fields))
		}
	}
}

// writeCapLine writes a capability's line: its kind, its name, what
// follows (already printable), and the kernel's attributes, each in
// brackets as mandate graph shows them.
func writeCapLine(w io.Writer, c checkCap, rest string) {
	line := fmt.Sprintf("  %s %q", kindapi.Printable(c.Kind), kindapi.Printable(c.Cap))
	if rest != "" {
		line += ": " + rest
	}
	fmt.Fprintln(w, line+c.Kernel.text())
}

// writeFields writes a capability's grant on a line of its own.
func writeFields(w io.Writer, fields []kindapi.Detail) {
	if len(fields) > 0 {
		fmt.Fprintf(w, "    grant: %s\n", fieldsText(fields))
	}
}

// fieldsText renders a kind's fields as mandate graph does: name=value
// name="a value", escaped.
func fieldsText(fields []kindapi.Detail) string {
	return viewSummary(kernel.CapView{Fields: fields})
}

// text renders the attributes set: " [audit] [rate 10/s] [max_uses 1]".
func (a checkKernel) text() string {
	var b strings.Builder
	if a.Audit {
		b.WriteString(" [audit]")
	}
	if a.Rate != "" {
		fmt.Fprintf(&b, " [rate %s]", a.Rate)
	}
	if a.MaxUses > 0 {
		fmt.Fprintf(&b, " [max_uses %d]", a.MaxUses)
	}
	if a.Budget != "" {
		fmt.Fprintf(&b, " [budget %s]", kindapi.Printable(a.Budget))
	}
	if len(a.When) > 0 {
		fmt.Fprintf(&b, " [when %s]", kindapi.Printable(strings.Join(a.When, " && ")))
	}
	if len(a.ApproveWhen) > 0 {
		fmt.Fprintf(&b, " [approve_when %s]", kindapi.Printable(strings.Join(a.ApproveWhen, " || ")))
	}
	if a.History > 0 {
		fmt.Fprintf(&b, " [history %d]", a.History)
	}
	return b.String()
}

// printableList renders strings a kind or a manifest wrote as "a, b".
func printableList(ss []string) string { return joinPrintable(ss, ", ") }

// tagSet renders tags as {a,b}.
func tagSet(tags []string) string { return "{" + joinPrintable(tags, ",") + "}" }

// joinPrintable joins strings a kind or a manifest wrote, each made
// printable.
func joinPrintable(ss []string, sep string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = kindapi.Printable(s)
	}
	return strings.Join(out, sep)
}
