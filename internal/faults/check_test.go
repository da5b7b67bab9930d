//go:build unix

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mandatevm/mandate/fleet"
	"github.com/nats-io/nats.go/jetstream"
)

// The assertions, by name (the summary at the end counts them).
const (
	ruleFinal     = "every submission ends in one final state"
	ruleAfterLost = "no request after the lost mark"
	ruleHealthy   = "no run of an unfaulted node declared lost"
	ruleOverwrite = "no final state overwritten"
	ruleTwice     = "no request twice without retry"
	ruleAudit     = "every node's audit copy verifies"
)

// violate reports a violation once (by key); where is a scenario's label
// or a moment ("at the end").
func (e *env) violate(where, rule, key, text string) {
	if e.reported[key] {
		return
	}
	e.reported[key] = true
	e.byRule[rule] = append(e.byRule[rule], where)
	e.t.Errorf("%s: %s: %s", where, rule, text)
}

// check asserts, for subs (those of sc, or every submission at the end
// with sc nil), what the package doc lists.
func (e *env) check(ctx context.Context, sc *scenario, subs []*submission) {
	where := "at the end"
	if sc != nil {
		where = sc.label
	}
	for _, s := range subs {
		if err := e.h.complete(ctx, e.f, s.id); err != nil {
			e.t.Logf("the history of %s: %v", s.id, err)
		}
		if st, rev, err := e.f.State(ctx, s.id); err == nil {
			e.h.add(s.id, update{Rev: rev, Via: "get", S: st})
		}
	}
	for _, s := range subs {
		us := e.h.of(s.id)
		reqs := e.fx.requests(s.id)
		var found []string
		add := func(rule, key, text string) {
			if e.reported[key] {
				return
			}
			e.reported[key] = true
			e.byRule[rule] = append(e.byRule[rule], where)
			found = append(found, "  - "+rule+": "+text)
		}

		// Every submission ends in exactly one final state.
		if sc == nil && e.reported[s.id+"/final"] && len(us) > 0 && us[len(us)-1].S.Final() {
			e.t.Logf("%s, not final when its scenario was checked, ended later:\n%s", s.id, e.describe(s, us, reqs))
		}
		if len(us) == 0 || !us[len(us)-1].S.Final() {
			add(ruleFinal, s.id+"/final",
				fmt.Sprintf("%s is not in a final state (waited up to %s after its scenario's fault ended, and %s with no state moving)", s.id, finalBound, stallBound))
		}
		for _, u := range us {
			if u.Bad != "" {
				add(ruleFinal, fmt.Sprintf("%s/bad/%d", s.id, u.Rev), fmt.Sprintf("%s: revision %d is not a state: %s", s.id, u.Rev, u.Bad))
			}
		}

		// No final state overwritten: once final, the state stays (a lost
		// state may gain the text of the node that ran it, still lost).
		first := slices.IndexFunc(us, func(u update) bool { return u.S.Final() })
		if first >= 0 {
			f := us[first]
			for _, u := range us[first+1:] {
				if u.S.State == f.S.State && f.S.State == fleet.StateLost {
					continue
				}
				add(ruleOverwrite, fmt.Sprintf("%s/overwrite/%d", s.id, u.Rev),
					fmt.Sprintf("%s was %s (revision %d, %s) and then written %s by revision %d at %s (node %s)",
						s.id, f.S.State, f.Rev, e.at(f.At), u.S.State, u.Rev, e.at(u.At), u.S.Node))
			}
		}

		// No request after the lost mark: the lost state's Ended, when
		// the fleet declared the run lost (the mark's own time, not when
		// the write reached the stream).
		if i := slices.IndexFunc(us, func(u update) bool { return u.S.State == fleet.StateLost }); i >= 0 {
			mark := us[i].S.Ended
			if mark.IsZero() {
				mark = us[i].At
			}
			for _, r := range reqs {
				if r.Arrived.After(mark.Add(clockSlack)) {
					add(ruleAfterLost, fmt.Sprintf("%s/after/%s/%s/%d", s.id, r.Method, r.URI, r.Arrived.UnixNano()),
						fmt.Sprintf("%s %s of %s (run on %s) arrived at %s, %s after the lost mark at %s (revision %d)",
							r.Method, r.URI, s.id, us[i].S.Node, e.at(r.Arrived), r.Arrived.Sub(mark).Round(time.Millisecond),
							e.at(mark), us[i].Rev))
				}
			}
		}
		// A retried run: the lost attempt makes no request once the
		// fleet queued the run again, until the next attempt is claimed
		// (the fixture cannot tell attempts apart after that).
		for i, u := range us {
			if i == 0 || u.S.State != fleet.StateQueued || len(u.S.Lost) <= len(us[i-1].S.Lost) || u.At.IsZero() {
				continue
			}
			var claim time.Time
			for _, v := range us[i+1:] {
				if v.S.State == fleet.StateRunning && v.S.Attempt > u.S.Attempt {
					claim = v.S.Started
					break
				}
			}
			for _, r := range reqs {
				if r.Arrived.After(u.At.Add(clockSlack)) && (claim.IsZero() || r.Arrived.Before(claim)) {
					add(ruleAfterLost, fmt.Sprintf("%s/requeued/%s/%s/%d", s.id, r.Method, r.URI, r.Arrived.UnixNano()),
						fmt.Sprintf("%s %s of %s arrived at %s, after attempt %d was declared lost and the run queued again (revision %d at %s) and before attempt %d was claimed (%s)",
							r.Method, r.URI, s.id, e.at(r.Arrived), u.S.Attempt, u.Rev, e.at(u.At), u.S.Attempt+1, e.at(claim)))
				}
			}
		}

		// No run of a node the scenario did not fault declared lost.
		for i, u := range us {
			var prev fleet.RunState
			if i > 0 {
				prev = us[i-1].S
			}
			var node string
			switch {
			case u.S.State == fleet.StateLost && prev.State != fleet.StateLost:
				node = u.S.Node
			case len(u.S.Lost) > len(prev.Lost):
				node, _, _ = strings.Cut(u.S.Lost[len(u.S.Lost)-1], " ")
			default:
				continue
			}
			if !slices.Contains(s.sc.victims, node) {
				faulted := "no node"
				if len(s.sc.victims) > 0 {
					faulted = strings.Join(s.sc.victims, ", ")
				}
				add(ruleHealthy, fmt.Sprintf("%s/healthy/%d", s.id, u.Rev),
					fmt.Sprintf("%s's run on %s was declared lost (revision %d at %s) in %s, which faulted %s",
						s.id, node, u.Rev, e.at(u.At), s.sc.label, faulted))
			}
		}

		// No request twice: a run is never run again behind the person's
		// back; a retried one at most once per attempt.
		attempts := 1
		for _, u := range us {
			attempts = max(attempts, u.S.Attempt)
		}
		limit := 1
		if s.kind == kindRetry {
			limit = attempts
		}
		seen := map[string]int{}
		for _, r := range reqs {
			k := r.Method + " " + r.URI
			seen[k]++
			if seen[k] == limit+1 {
				add(ruleTwice, s.id+"/twice/"+k,
					fmt.Sprintf("%s %s of %s arrived more than %d time(s) (%d attempt(s))", r.Method, r.URI, s.id, limit, attempts))
			}
		}
		if len(found) > 0 {
			e.t.Errorf("%s: %s:\n%s\n%s", where, s.id, strings.Join(found, "\n"), e.describe(s, us, reqs))
		}
	}
}

// checkAudit verifies every node's copied audit log.
func (e *env) checkAudit(ctx context.Context, where string) {
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	logs, err := fleet.VerifyAudit(actx, e.f.JS)
	if err != nil {
		e.violate(where, ruleAudit, where+"/audit", fmt.Sprintf("reading the audit copies: %v", err))
		return
	}
	var sum []string
	for _, na := range logs {
		if na.Err != nil {
			e.violate(where, ruleAudit, where+"/audit/"+na.Node+"/"+na.Err.Error(),
				fmt.Sprintf("%s's copied audit log does not verify: %v (%d entries copied)", na.Node, na.Err, na.Entries))
			continue
		}
		sum = append(sum, fmt.Sprintf("%s %d entries of %d runs (checkpoint %d)", na.Node, na.Entries, len(na.Runs), na.Checkpoint))
	}
	e.t.Logf("%s: audit copies: %s", where, strings.Join(sum, "; "))
}

// describe is what a violation shows of a submission: its kind and
// script, its scenario's timeline, its state history and its requests.
func (e *env) describe(s *submission, us []update, reqs []request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    submission %s (%s), held on %s, released %s after the fault began; script %q\n", s.id, s.kind, s.node,
		s.release.Round(time.Millisecond), s.script)
	s.sc.mu.Lock()
	fmt.Fprintf(&b, "    %s's timeline:\n", s.sc.label)
	for _, ev := range s.sc.events {
		fmt.Fprintf(&b, "      %s\n", ev)
	}
	s.sc.mu.Unlock()
	fmt.Fprintf(&b, "    state history:\n")
	for _, u := range us {
		fmt.Fprintf(&b, "      %s\n", e.fmtUpdate(u))
	}
	fmt.Fprintf(&b, "    requests:\n")
	for _, r := range reqs {
		end := "answered " + e.at(r.Answered)
		if r.Answered.IsZero() {
			end = "still held"
		} else if r.Aborted {
			end = "abandoned by the caller " + e.at(r.Answered)
		}
		fmt.Fprintf(&b, "      %s %s arrived %s, %s\n", r.Method, r.URI, e.at(r.Arrived), end)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (e *env) fmtUpdate(u update) string {
	if u.Rev == 0 {
		return "(no state seen)"
	}
	s := u.S
	line := fmt.Sprintf("rev %d %s (%s): %s node=%s run=%s attempt=%d started=%s ended=%s", u.Rev, e.at(u.At), u.Via,
		s.State, s.Node, s.RunID, s.Attempt, e.at(s.Started), e.at(s.Ended))
	if s.State == fleet.StateDone {
		line += fmt.Sprintf(" exit=%d", s.Exit)
	}
	if len(s.Lost) > 0 {
		line += fmt.Sprintf(" lost=%q", s.Lost)
	}
	if s.Error != "" {
		er := s.Error
		if len(er) > 300 {
			er = er[:300] + "..."
		}
		line += fmt.Sprintf(" error=%q", er)
	}
	if u.Op != jetstream.KeyValuePut {
		line += " op=" + u.Op.String()
	}
	return line
}
