package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// KindName is the name the kind registers under.
const KindName = "data"

// Query limits.
const (
	DefaultQueryLimit = 100
	MaxQueryLimit     = 1000
	// MaxWhere bounds the conditions of one query.
	MaxWhere = 32
)

// Kind is the data capability kind. It is safe for concurrent use.
type Kind struct {
	mu     sync.Mutex
	store  Backend
	err    error
	open   func() (Backend, error)
	opened bool // the kind opened store itself, and Close closes it
}

var _ kindapi.Kind = (*Kind)(nil)

// Option configures a Kind.
type Option func(*Kind)

// New returns the data kind over store (nil: every operation fails).
// Close does not close store: its opener does.
func New(store Backend, opts ...Option) *Kind {
	k := &Kind{store: store}
	for _, o := range opts {
		o(k)
	}
	return k
}

// NewLazy returns the data kind over the store open returns, called on
// the first operation (not on Grant or Narrow), so that a run that never
// uses data opens no database. Close closes that store.
func NewLazy(open func() (Backend, error), opts ...Option) *Kind {
	k := &Kind{open: open}
	for _, o := range opts {
		o(k)
	}
	return k
}

// Close closes the store the kind opened itself (NewLazy); it is a no-op
// otherwise.
func (k *Kind) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.opened && k.store != nil {
		err := k.store.Close()
		k.store, k.opened = nil, false
		k.err = errors.New("data: the store is closed")
		return err
	}
	return nil
}

func (k *Kind) getStore() (Backend, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.store != nil {
		return k.store, nil
	}
	if k.err != nil {
		return nil, k.err
	}
	if k.open == nil {
		k.err = errors.New("data: no store")
		return nil, k.err
	}
	s, err := k.open()
	if err != nil {
		k.err = err
		return nil, err
	}
	k.store, k.opened = s, true
	return s, nil
}

// Name returns "data".
func (k *Kind) Name() string { return KindName }

// Info implements kindapi.Kind: operations query, read and write;
// constraints see the call's arguments as "args".
func (k *Kind) Info() kindapi.Info { return kindapi.Info{Ops: slices.Clone(allOps)} }

// Describe implements kindapi.Kind. Its Reach is what the scope could
// read of the records a manifest seeds (see Scope.reach).
func (k *Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, "data")
	if err != nil {
		return kindapi.Description{}
	}
	fields := "all"
	if f := s.Fields(); f != nil {
		fields = strings.Join(f, ", ")
	}
	return kindapi.Description{
		Fields: []kindapi.Detail{
			{Name: "collection", Value: s.collection},
			{Name: "records", Value: s.rulesText()},
			{Name: "fields", Value: fields},
			{Name: "ops", Value: strings.Join(s.ops, ", ")},
		},
		Label:         s.Label(),
		Reaches:       []string{s.collection},
		Reach:         s.reach,
		Repeatable:    !s.AllowsOp(OpWrite),
		NotRepeatable: notRepeatable(s),
	}
}

func notRepeatable(s *Scope) string {
	if s.AllowsOp(OpWrite) {
		return "it allows write, and a write done twice may differ from one"
	}
	return ""
}

// Grant mints a root scope from a cap "data" block; errors are
// *kindapi.FieldError when they concern one field.
func (k *Kind) Grant(_ kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return kindapi.AsScope(grant(spec))
}

// Narrow returns the scope req asks for within parent: EINVAL for a
// malformed request, EDENIED for any widening (never clamped).
func (k *Kind) Narrow(parent kindapi.Scope, req []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, "data")
	if err != nil {
		return nil, err
	}
	return kindapi.AsScope(narrow(p, req))
}

// Operation arguments.
type readArgs struct {
	ID     *string  `json:"id"`
	Owner  *string  `json:"owner"`
	Fields []string `json:"fields"`
}

type queryArgs struct {
	Where  map[string]json.RawMessage `json:"where"`
	Limit  *int                       `json:"limit"`
	Fields []string                   `json:"fields"`
}

type writeArgs struct {
	ID     string                     `json:"id"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// resultRecord is a record as a guest sees it: only the projected fields.
type resultRecord struct {
	ID     string                     `json:"id"`
	Owner  string                     `json:"owner"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// errOutside is the one error for a record that is outside the slice or
// does not exist: the two are indistinguishable to the guest.
func errOutside(what string) error {
	return kindapi.Errorf(abi.EDENIED, "data: %s is not in this capability's records (or does not exist)", what)
}

// Prepare decodes a read, query or write and checks it against the
// scope's operations and fields. Record-level checks need the store (is
// the record in the slice, may the task's label flow into its fields) and
// are made in the effect's own transaction: refused there, nothing is read
// or written, and the kernel counts no use (kindapi.NotPerformed).
func (k *Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	s, err := kindapi.ScopeAs[*Scope](call.Scope, "data")
	if err != nil {
		return kindapi.Op{}, err
	}
	if !s.AllowsOp(call.Op) {
		if !slices.Contains(allOps, call.Op) {
			return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "data: no operation %q", trunc(call.Op))
		}
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "data: operation %s not allowed (ops %v)", call.Op, s.ops)
	}
	principal, args := call.Task.Principal, call.Args
	show := func(what string) func() kindapi.Preview {
		return func() kindapi.Preview {
			return kindapi.Preview{Summary: what + " in " + s.collection,
				Details: []kindapi.Detail{{Name: "collection", Value: s.collection}, {Name: "arguments", Value: string(args)}}}
		}
	}
	switch call.Op {
	case OpRead:
		var a readArgs
		if err := decodeArgs(call.Args, &a); err != nil {
			return kindapi.Op{}, err
		}
		id := ""
		if a.ID != nil {
			id = *a.ID
		}
		return kindapi.Op{Show: show("read record " + trunc(id)), Effect: func(ctx context.Context) (*kindapi.Result, error) {
			res, err := k.read(ctx, s, principal, a)
			return res, refusedInStore(err)
		}}, nil
	case OpQuery:
		var a queryArgs
		if err := decodeArgs(call.Args, &a); err != nil {
			return kindapi.Op{}, err
		}
		return kindapi.Op{Show: show("query records"), Effect: func(ctx context.Context) (*kindapi.Result, error) {
			res, err := k.query(ctx, s, principal, a)
			return res, refusedInStore(err)
		}}, nil
	case OpWrite:
		var a writeArgs
		if err := decodeArgs(call.Args, &a); err != nil {
			return kindapi.Op{}, err
		}
		from := call.TaskLabel()
		return kindapi.Op{NoResult: true, Show: show("write record " + trunc(a.ID)), Effect: func(ctx context.Context) (*kindapi.Result, error) {
			return nil, refusedInStore(k.write(ctx, s, principal, from, a))
		}, Account: func() kindapi.Account {
			// A write changes the principal's data: an effect to list.
			fields, _ := json.Marshal(a.Fields) // keys sorted
			return kindapi.Account{Action: "write record " + strconv.Quote(a.ID) + " of " + s.collection, Written: " " + string(fields)}
		}}, nil
	}
	return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "data: no operation %q", trunc(call.Op))
}

// refusedInStore marks a refusal made inside the store's transaction as
// one with no effect: nothing was read out or written.
func refusedInStore(err error) error {
	switch kindapi.ErrnoOf(err) {
	case abi.EDENIED, abi.EFLOW, abi.ELIMIT, abi.EINVAL, abi.ENOTFOUND:
		return kindapi.NotPerformed(err)
	}
	return err
}

func decodeArgs(b []byte, v any) error {
	if err := abi.DecodeJSON(b, v); err != nil {
		if errors.Is(err, abi.ErrTooLarge) {
			return kindapi.Errorf(abi.ELIMIT, "data: arguments: %v", err)
		}
		return kindapi.Errorf(abi.EINVAL, "data: arguments: %v", err)
	}
	return nil
}

// projection returns the fields a call asks for: those named (each must be
// in the slice, else EDENIED), or nil for every field of the slice.
func projection(s *Scope, fields []string) ([]string, error) {
	if fields == nil {
		return nil, nil
	}
	if len(fields) == 0 || len(fields) > MaxListLen {
		return nil, kindapi.Errorf(abi.EINVAL, "data: fields: want 1..%d names", MaxListLen)
	}
	var outside []string
	for _, f := range fields {
		if !s.AllowsField(f) {
			outside = append(outside, trunc(f))
		}
	}
	if outside != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "data: fields %v are not in this capability's slice %v", outside, s.Fields())
	}
	return fields, nil
}

// checker decides whether records are within a scope's rules for one
// principal, caching relation lookups.
type checker struct {
	ctx       context.Context
	q         Reader
	s         *Scope
	principal string
	rel       map[string]map[string]bool // relation -> objects
}

func (c *checker) allows(r Record) (bool, error) {
	for _, ru := range c.s.rules {
		switch ru.kind {
		case ruleOwn:
			if c.principal == "" || r.Owner != c.principal {
				return false, nil
			}
		case ruleRelation:
			objs, err := c.related(ru.relation)
			if err != nil {
				return false, err
			}
			if !objs[r.Owner] {
				return false, nil
			}
		case ruleOwners:
			if _, ok := slices.BinarySearch(ru.list, r.Owner); !ok {
				return false, nil
			}
		case ruleIDs:
			if _, ok := slices.BinarySearch(ru.list, r.ID); !ok {
				return false, nil
			}
		default:
			return false, fmt.Errorf("data: unknown rule %q", ru.kind)
		}
	}
	return true, nil
}

func (c *checker) related(relation string) (map[string]bool, error) {
	if m, ok := c.rel[relation]; ok {
		return m, nil
	}
	m := map[string]bool{}
	if c.principal != "" {
		objs, err := c.q.Related(c.ctx, c.principal, relation)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			m[o] = true
		}
	}
	if c.rel == nil {
		c.rel = map[string]map[string]bool{}
	}
	c.rel[relation] = m
	return m, nil
}

// candidates returns the records that may be within the scope, sorted by
// id: a superset of what the rules allow, drawn by the most selective
// rule. The caller filters them with checker.allows.
func (c *checker) candidates() ([]Record, error) {
	col := c.s.collection
	var ids, owners []string
	haveIDs, haveOwners := false, false
	for _, ru := range c.s.rules {
		switch ru.kind {
		case ruleIDs:
			ids, haveIDs = intersect(ids, ru.list, haveIDs), true
		case ruleOwners:
			owners, haveOwners = intersect(owners, ru.list, haveOwners), true
		case ruleOwn:
			owners, haveOwners = intersect(owners, []string{c.principal}, haveOwners), true
		}
	}
	if !haveIDs && !haveOwners {
		// Only relation rules: the owners are the related principals.
		for _, ru := range c.s.rules {
			if ru.kind == ruleRelation {
				m, err := c.related(ru.relation)
				if err != nil {
					return nil, err
				}
				l := make([]string, 0, len(m))
				for o := range m {
					l = append(l, o)
				}
				sort.Strings(l)
				owners, haveOwners = intersect(owners, l, haveOwners), true
			}
		}
	}
	var out []Record
	switch {
	case haveIDs:
		for _, id := range ids {
			r, ok, err := c.q.Get(c.ctx, col, id)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, r)
			}
		}
	case haveOwners:
		for _, o := range owners {
			rs, err := c.q.Owned(c.ctx, col, o)
			if err != nil {
				return nil, err
			}
			out = append(out, rs...)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	default:
		return nil, errors.New("data: a scope without a record rule")
	}
	return out, nil
}

// intersect intersects two sorted lists; when have is false, a is unset
// and b is returned.
func intersect(a, b []string, have bool) []string {
	if !have {
		return slices.Clone(b)
	}
	var out []string
	for _, v := range a {
		if _, ok := slices.BinarySearch(b, v); ok {
			out = append(out, v)
		}
	}
	return out
}

// project returns r with only the fields the scope (and the request, when
// want is not nil) allows, and the union of their labels.
func project(s *Scope, r Record, want []string) (resultRecord, []string) {
	out := resultRecord{ID: r.ID, Owner: r.Owner, Fields: map[string]json.RawMessage{}}
	var conf []string
	for f, v := range r.Fields {
		if !s.AllowsField(f) || (want != nil && !slices.Contains(want, f)) {
			continue
		}
		out.Fields[f] = v
		conf = append(conf, r.Labels[f]...)
	}
	return out, conf
}

func (k *Kind) read(ctx context.Context, s *Scope, principal string, a readArgs) (*kindapi.Result, error) {
	if (a.ID == nil) == (a.Owner == nil) {
		return nil, kindapi.Errorf(abi.EINVAL, `data: read: set exactly one of "id" and "owner"`)
	}
	want, err := projection(s, a.Fields)
	if err != nil {
		return nil, err
	}
	st, err := k.getStore()
	if err != nil {
		return nil, err
	}
	c := &checker{ctx: ctx, q: st, s: s, principal: principal}
	var found *Record
	if a.ID != nil {
		r, ok, err := st.Get(ctx, s.collection, *a.ID)
		if err != nil {
			return nil, err
		}
		if ok {
			if allowed, err := c.allows(r); err != nil {
				return nil, err
			} else if allowed {
				found = &r
			}
		}
		if found == nil {
			return nil, errOutside(fmt.Sprintf("record %q", trunc(*a.ID)))
		}
	} else {
		rs, err := st.Owned(ctx, s.collection, *a.Owner)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			allowed, err := c.allows(r)
			if err != nil {
				return nil, err
			}
			if allowed {
				found = &r
				break
			}
		}
		if found == nil {
			return nil, errOutside(fmt.Sprintf("a record of owner %q", trunc(*a.Owner)))
		}
	}
	rec, conf := project(s, *found, want)
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return &kindapi.Result{Data: b, Label: kindapi.NewLabel(conf, []string{"data:" + s.collection})}, nil
}

func (k *Kind) query(ctx context.Context, s *Scope, principal string, a queryArgs) (*kindapi.Result, error) {
	limit := DefaultQueryLimit
	if a.Limit != nil {
		if *a.Limit < 1 || *a.Limit > MaxQueryLimit {
			return nil, kindapi.Errorf(abi.EINVAL, "data: query: limit must be 1..%d", MaxQueryLimit)
		}
		limit = *a.Limit
	}
	if len(a.Where) > MaxWhere {
		return nil, kindapi.Errorf(abi.EINVAL, "data: query: %d conditions (max %d)", len(a.Where), MaxWhere)
	}
	// A condition on a field outside the slice would be an oracle for its
	// value: refused like reading it.
	where := make(map[string]string, len(a.Where))
	var outside []string
	for f, v := range a.Where {
		if !s.AllowsField(f) {
			outside = append(outside, trunc(f))
			continue
		}
		c, err := canonValue(v)
		if err != nil {
			return nil, kindapi.Errorf(abi.EINVAL, "data: query: where %s: %v", trunc(f), err)
		}
		where[f] = string(c)
	}
	if outside != nil {
		sort.Strings(outside)
		return nil, kindapi.Errorf(abi.EDENIED, "data: query: fields %v are not in this capability's slice %v", outside, s.Fields())
	}
	want, err := projection(s, a.Fields)
	if err != nil {
		return nil, err
	}
	st, err := k.getStore()
	if err != nil {
		return nil, err
	}
	c := &checker{ctx: ctx, q: st, s: s, principal: principal}
	cands, err := c.candidates()
	if err != nil {
		return nil, err
	}
	out := struct {
		Records   []resultRecord `json:"records"`
		Truncated bool           `json:"truncated"`
	}{Records: []resultRecord{}}
	var conf []string
	for _, r := range cands {
		allowed, err := c.allows(r)
		if err != nil {
			return nil, err
		}
		if !allowed {
			continue
		}
		// Whether a record matches reveals something about its where
		// fields, returned or not (an empty result too): the result
		// carries their labels for every record examined.
		for f := range where {
			conf = append(conf, r.Labels[f]...)
		}
		if !matches(r, where) {
			continue
		}
		if len(out.Records) == limit {
			out.Truncated = true
			break
		}
		pr, pc := project(s, r, want)
		out.Records = append(out.Records, pr)
		conf = append(conf, pc...)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &kindapi.Result{Data: b, Label: kindapi.NewLabel(conf, []string{"data:" + s.collection})}, nil
}

func matches(r Record, where map[string]string) bool {
	for f, v := range where {
		if got, ok := r.Fields[f]; !ok || string(got) != v {
			return false
		}
	}
	return true
}

// write updates fields of one record. A field is a sink cleared for its own
// labels: what the task writes carries the task's label, which must flow
// there (a task that read the passport cannot copy it into an unlabelled
// field for a clean task to read back).
func (k *Kind) write(ctx context.Context, s *Scope, principal string, from kindapi.Label, a writeArgs) error {
	if a.ID == "" {
		return kindapi.Errorf(abi.EINVAL, `data: write: "id" is required`)
	}
	if len(a.Fields) == 0 || len(a.Fields) > MaxFieldsPerRec {
		return kindapi.Errorf(abi.EINVAL, "data: write: want 1..%d fields", MaxFieldsPerRec)
	}
	var outside []string
	vals := make(map[string]json.RawMessage, len(a.Fields))
	for f, v := range a.Fields {
		if !s.AllowsField(f) {
			outside = append(outside, trunc(f))
			continue
		}
		c, err := canonValue(v)
		if err != nil {
			return kindapi.Errorf(abi.EINVAL, "data: write: field %s: %v", trunc(f), err)
		}
		vals[f] = c
	}
	if outside != nil {
		sort.Strings(outside)
		return kindapi.Errorf(abi.EDENIED, "data: write: fields %v are not in this capability's slice %v", outside, s.Fields())
	}
	st, err := k.getStore()
	if err != nil {
		return err
	}
	return st.Update(ctx, s.collection, a.ID, func(q Reader, r *Record, ok bool) error {
		if ok {
			c := &checker{ctx: ctx, q: q, s: s, principal: principal}
			allowed, err := c.allows(*r)
			if err != nil {
				return err
			}
			ok = allowed
		}
		if !ok {
			return errOutside(fmt.Sprintf("record %q", trunc(a.ID)))
		}
		var missing []string
		for f := range vals {
			if _, has := r.Fields[f]; !has {
				missing = append(missing, f)
			}
		}
		if missing != nil {
			sort.Strings(missing)
			return kindapi.Errorf(abi.EDENIED, "data: write: record %q has no fields %v (a write only updates existing fields)", trunc(a.ID), missing)
		}
		var low []string
		for f := range vals {
			if !from.CanFlowTo(kindapi.NewLabel(r.Labels[f], nil)) {
				low = append(low, f)
			}
		}
		if low != nil {
			sort.Strings(low)
			return kindapi.Errorf(abi.EFLOW, "data: write: the task's label %s may not flow into fields %v of record %q (their labels are lower)",
				from, low, trunc(a.ID))
		}
		size := 0
		for f, v := range vals {
			r.Fields[f] = v
		}
		for f, v := range r.Fields {
			size += len(f) + len(v)
		}
		if size > MaxRecordBytes {
			return kindapi.Errorf(abi.ELIMIT, "data: write: the record would be %d bytes (max %d)", size, MaxRecordBytes)
		}
		return nil
	})
}
