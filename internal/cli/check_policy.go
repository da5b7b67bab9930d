package cli

// mandate check on a policy: each tool checked as a task of the session,
// what a session could come to be shown, and which tools it would then
// lose.

import (
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
)

// policyReport is "mandate check POLICY.hcl --format json": each tool's
// report, as a task holding its capabilities, and what the session could
// come to be shown and which tools it would then lose.
type policyReport struct {
	Session struct {
		Principal    string   `json:"principal"`
		Clearance    []string `json:"clearance"` // nil: unbounded
		CouldBeShown []string `json:"could_be_shown"`
	} `json:"session"`
	Tools map[string]*checkReport `json:"tools"`
	// Unavailable are the tools a session loses once it was shown
	// CouldBeShown, with why.
	Unavailable map[string][]string `json:"unavailable_after"`
}

// checkPolicy checks a policy: each tool as a task of the session's
// principal and clearance, with the session's seeds.
func (e *env) checkPolicy(p *manifest.Policy, format string) int {
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	rep := policyReport{Tools: map[string]*checkReport{}, Unavailable: map[string][]string{}}
	rep.Session.Principal = p.Session.Principal
	if p.Session.Clearance != nil {
		rep.Session.Clearance = nonNil(p.Session.Clearance.Conf())
	}
	shown := map[string]bool{}
	ms := map[string]*manifest.Manifest{}
	for _, t := range p.Tools {
		m := &manifest.Manifest{Path: p.Path, Dir: p.Dir, Name: t.Name, ModulePath: t.ModulePath, ModuleIsDir: t.ModuleIsDir,
			Principal: p.Session.Principal, Caps: t.Caps, Seeds: p.Session.Seeds, Clearance: p.Session.Clearance}
		g, err := checkGrants(m, ks, host.Declassifiers())
		if err != nil {
			return e.manifestError(err)
		}
		r, err := checkManifest(m, g)
		if err != nil {
			return e.manifestError(err)
		}
		rep.Tools[t.Name], ms[t.Name] = r, m
		if t.Result != manifest.ResultReference {
			for _, tag := range r.CouldHold {
				shown[tag] = true
			}
		}
	}
	rep.Session.CouldBeShown = nonNil(sortedSet(shown))
	for _, t := range p.Tools {
		for _, sk := range rep.Tools[t.Name].Sinks {
			var above []string
			for _, tag := range rep.Session.CouldBeShown {
				if !slices.Contains(sk.Clearance, tag) {
					above = append(above, tag)
				}
			}
			if len(above) > 0 {
				rep.Unavailable[t.Name] = append(rep.Unavailable[t.Name],
					fmt.Sprintf("%s %q is cleared for %s, not %s", sk.Kind, sk.Cap, tagSet(sk.Clearance), tagSet(above)))
			}
		}
	}
	if format == "json" {
		if err := writeJSON(e.stdout, rep); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		return exitOK
	}
	w := e.stdout
	pr := kindapi.Printable
	fmt.Fprintf(w, "policy %s: a session acting for %s", pr(p.Path), pr(p.Session.Principal))
	if rep.Session.Clearance != nil {
		fmt.Fprintf(w, ", cleared for %s", tagSet(rep.Session.Clearance))
	}
	fmt.Fprintf(w, "\n  could be shown: %s (results returned by value)\n", tagSet(rep.Session.CouldBeShown))
	if len(rep.Unavailable) == 0 {
		fmt.Fprintln(w, "  every tool stays available whatever the session is shown")
	}
	for _, t := range p.Tools {
		for _, why := range rep.Unavailable[t.Name] {
			fmt.Fprintf(w, "  once it was shown that, %s is refused (EFLOW): %s\n", pr(t.Name), pr(why))
		}
	}
	for _, t := range p.Tools {
		fmt.Fprintf(w, "\n== tool %s\n", pr(t.Name))
		writeCheckText(w, ms[t.Name], rep.Tools[t.Name])
	}
	return exitOK
}
