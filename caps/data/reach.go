package data

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// reach is what the scope could bring into a task acting for principal,
// from the records a manifest's seeds import before a run (mandate check
// runs nothing): the labels of the scope's fields of the seeded records
// its rules reach, "$owner" replaced by each record's owner, as the store
// imports them. The seeds are read as the store imports them, in order: a
// record replaces a seeded record of the same collection and id, and the
// relation edges derived from it.
//
// A relation rule is resolved against the edges the seeds' relations
// derive; when no seed declares the relation, the rule is taken to allow
// every record (an over-approximation: the edges may come from elsewhere).
// A collection no seed names is unknown: Reach.Known is false. Records
// imported into the store otherwise (mandate data import) are not seen.
func (s *Scope) reach(principal string, seeds []kindapi.Seed) kindapi.Reach {
	r := kindapi.Reach{Summary: s.summary()}

	records := map[string]Record{} // of s.collection, by id
	type source struct{ collection, id string }
	edges := map[source][]Relation{} // the edges each seeded record derives
	declared := map[string]bool{}    // relations some seed declares
	seeded := false
	for i, sd := range seeds {
		recs, err := ParseJSON(bytes.NewReader(sd.Records))
		if err != nil {
			r.Note = fmt.Sprintf("unknown (seed %d of collection %s: %v)", i, sd.Collection, err)
			return r
		}
		for _, rel := range sd.Relations {
			declared[rel] = true
		}
		if sd.Collection == s.collection {
			seeded = true
		}
		for _, rec := range recs {
			n, err := normalize(rec)
			if err != nil {
				r.Note = fmt.Sprintf("unknown (seed %d of collection %s: %v)", i, sd.Collection, err)
				return r
			}
			if sd.Collection == s.collection {
				records[n.ID] = n
			}
			src := source{sd.Collection, n.ID}
			delete(edges, src)
			for field, rel := range sd.Relations {
				v, ok := n.Fields[field]
				if !ok {
					continue
				}
				subjects, _ := relationSubjects(v) // the store refuses a bad one
				for _, sub := range subjects {
					edges[src] = append(edges[src], Relation{Subject: sub, Relation: rel, Object: n.Owner})
				}
			}
		}
	}
	if !seeded {
		r.Note = "unknown (no seed data)"
		return r
	}
	r.Known = true

	// related[R] is the owners principal is R of.
	related := map[string]map[string]bool{}
	for _, es := range edges {
		for _, e := range es {
			if e.Subject != principal || principal == "" {
				continue
			}
			if related[e.Relation] == nil {
				related[e.Relation] = map[string]bool{}
			}
			related[e.Relation][e.Object] = true
		}
	}
	var notes []string
	note := func(n string) {
		if !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	allows := func(rec Record) bool {
		for _, ru := range s.rules {
			switch ru.kind {
			case ruleOwn:
				if principal == "" {
					note(`no principal: "own" allows no record`)
					return false
				}
				if rec.Owner != principal {
					return false
				}
			case ruleRelation:
				switch {
				case principal == "":
					note(fmt.Sprintf("no principal: the relation %q allows no record", ru.relation))
					return false
				case !declared[ru.relation]:
					note(fmt.Sprintf("no seed declares the relation %q: every record of the collection (an over-approximation)", ru.relation))
				case !related[ru.relation][rec.Owner]:
					return false
				}
			case ruleOwners:
				if _, ok := slices.BinarySearch(ru.list, rec.Owner); !ok {
					return false
				}
			case ruleIDs:
				if _, ok := slices.BinarySearch(ru.list, rec.ID); !ok {
					return false
				}
			default:
				note(fmt.Sprintf("unknown rule %q: every record of the collection (an over-approximation)", ru.kind))
			}
		}
		return true
	}

	tags := map[string]bool{}
	byField := map[string]map[string]bool{}
	n := 0
	for _, rec := range records {
		if !allows(rec) {
			continue
		}
		n++
		for field, ls := range rec.Labels {
			if !s.AllowsField(field) {
				continue
			}
			for _, t := range ls {
				tags[t] = true
				if byField[field] == nil {
					byField[field] = map[string]bool{}
				}
				byField[field][t] = true
			}
		}
	}
	r.Tags = sortedKeys(tags)
	if len(byField) > 0 {
		r.ByField = make(map[string][]string, len(byField))
		for f, ts := range byField {
			r.ByField[f] = sortedKeys(ts)
		}
	}
	slices.Sort(notes)
	r.Note = strings.Join(append([]string{fmt.Sprintf("%d seeded record(s) reachable", n)}, notes...), "; ")
	return r
}

// summary says what the scope reads: "collection benefits, records own,
// fields plan, passport".
func (s *Scope) summary() string {
	return fmt.Sprintf("collection %s, records %s, fields %s", s.collection, s.rulesText(), strings.Join(s.Fields(), ", "))
}

// rulesText is the scope's chain of record rules for a person: "own",
// "relation manager_of", "owners alice, bob", "own and ids b1".
func (s *Scope) rulesText() string {
	rules := make([]string, 0, len(s.rules))
	for _, ru := range s.rules {
		switch ru.kind {
		case ruleOwn:
			rules = append(rules, ruleOwn)
		case ruleRelation:
			rules = append(rules, "relation "+ru.relation)
		default:
			rules = append(rules, ru.kind+" "+strings.Join(ru.list, ", "))
		}
	}
	return strings.Join(rules, " and ")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
