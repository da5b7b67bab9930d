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

		// No request after the lost mark. Each attempt's requests carry
		// its nonce; an attempt is the last one claimed (Started) before
		// its first request arrived. Its lost mark is when the fleet
		// declared it lost: the lost state's Ended, or, for a retried run
		// queued again, that state's time in the stream.
		atts := attemptsOf(us)
		byNonce := map[string][]request{}
		var nonces []string
		for _, r := range reqs {
			if _, ok := byNonce[r.Attempt]; !ok {
				nonces = append(nonces, r.Attempt)
			}
			byNonce[r.Attempt] = append(byNonce[r.Attempt], r)
		}
		for _, nonce := range nonces {
			rs := byNonce[nonce]
			k := attemptAt(atts, rs[0].Arrived)
			a, ok := atts[k]
			if !ok || a.lost.IsZero() {
				continue
			}
			for _, r := range rs {
				if r.Arrived.After(a.lost.Add(clockSlack)) {
					add(ruleAfterLost, fmt.Sprintf("%s/after/%s/%s/%s/%d", s.id, nonce, r.Method, r.Path, r.Arrived.UnixNano()),
						fmt.Sprintf("%s %s of %s, attempt %d (a=%s, claimed by %s), arrived at %s, %s after the lost mark at %s (revision %d)",
							r.Method, r.Path, s.id, k, nonce, a.node, e.at(r.Arrived), r.Arrived.Sub(a.lost).Round(time.Millisecond),
							e.at(a.lost), a.lostRev))
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
				if steps, ok := e.clockFenced(u.At); ok && strings.Contains(u.S.Error+strings.Join(u.S.Lost, " "), "fenced itself") {
					e.t.Logf("%s: %s's run on %s was declared lost (revision %d at %s): its node fenced itself as the machine's wall clock jumped (%s), not a fault of the fleet",
						where, s.id, node, u.Rev, e.at(u.At), steps)
					continue
				}
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
		// back (one attempt without retry, one per claim with it), and an
		// attempt makes each request once.
		claims := max(1, len(atts))
		if s.kind != kindRetry {
			claims = 1
		}
		if len(nonces) > claims {
			add(ruleTwice, s.id+"/runs",
				fmt.Sprintf("%s (%s) made its requests from %d runs of its guest (nonces %v); the fleet claimed it %d time(s)",
					s.id, s.kind, len(nonces), nonces, len(atts)))
		}
		for _, nonce := range nonces {
			seen := map[string]int{}
			for _, r := range byNonce[nonce] {
				k := r.Method + " " + r.Path
				if seen[k]++; seen[k] == 2 {
					add(ruleTwice, s.id+"/twice/"+nonce+"/"+k,
						fmt.Sprintf("%s %s of %s arrived twice from one run of its guest (a=%s)", r.Method, r.Path, s.id, nonce))
				}
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
		fmt.Fprintf(&b, "      %s %s a=%s arrived %s, %s\n", r.Method, r.Path, r.Attempt, e.at(r.Arrived), end)
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
	if s.Incarnation != "" || s.Token != 0 {
		line += fmt.Sprintf(" incarnation=%s token=%d", s.Incarnation, s.Token)
	}
	if s.After != "" {
		line += fmt.Sprintf(" after=%q", s.After)
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

// attempt is what the history says of one attempt (one claim).
type attempt struct {
	node    string
	claimed time.Time // its Started
	lost    time.Time // when the fleet declared it lost (zero: never)
	lostRev uint64
}

// attemptsOf reads each attempt's claim and lost mark from a history.
func attemptsOf(us []update) map[int]*attempt {
	atts := map[int]*attempt{}
	get := func(k int) *attempt {
		if atts[k] == nil {
			atts[k] = &attempt{}
		}
		return atts[k]
	}
	for i, u := range us {
		k := u.S.Attempt
		if k == 0 {
			continue
		}
		var prev fleet.RunState
		if i > 0 {
			prev = us[i-1].S
		}
		if u.S.State == fleet.StateRunning && get(k).claimed.IsZero() {
			atts[k].claimed, atts[k].node = u.S.Started, u.S.Node
		}
		a := get(k)
		if !a.lost.IsZero() {
			continue
		}
		switch {
		case u.S.State == fleet.StateLost && prev.State != fleet.StateLost:
			a.lost, a.lostRev = u.S.Ended, u.Rev
			if a.lost.IsZero() {
				a.lost = u.At
			}
		case u.S.State == fleet.StateQueued && len(u.S.Lost) > len(prev.Lost) && !u.At.IsZero():
			a.lost, a.lostRev = u.At, u.Rev
		}
		if a.node == "" {
			a.node = u.S.Node
		}
	}
	return atts
}

// attemptAt is the attempt a run whose first request arrived at t is: the
// last one claimed before t (1 when no claim is known).
func attemptAt(atts map[int]*attempt, t time.Time) int {
	best := 0
	for k, a := range atts {
		if !a.claimed.IsZero() && !a.claimed.After(t) && k > best {
			best = k
		}
	}
	return max(best, 1)
}
