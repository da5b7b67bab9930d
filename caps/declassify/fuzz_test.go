package declassify

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// FuzzGrant: a grant spec never panics the kind; a granted scope drops
// something and contains itself.
func FuzzGrant(f *testing.F) {
	for _, s := range []string{
		`{"drop":["pii:alice","financial:alice"],"project":["fields.a","fields.b"]}`, `{"drop":["pii:alice"]}`, `{}`,
		`{"drop":[""]}`, `{"drop":["a"],"project":[]}`, `{"drop":["a"],"project":[" "]}`, `{"drop":"a"}`, `[`,
	} {
		f.Add([]byte(s))
	}
	k := New()
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := k.Grant(kindapi.GrantContext{}, b)
		if err != nil {
			return
		}
		sc := s.(*Scope)
		if len(sc.drop) == 0 || (sc.project != nil && len(sc.project) == 0) {
			t.Fatalf("Grant(%q) = %+v", b, sc)
		}
		if !s.Contains(s) {
			t.Fatalf("Grant(%q) = %+v, which does not contain itself", b, sc)
		}
	})
}

// FuzzNarrow: a narrowing request never panics; a success is contained in
// its parent; a failure is EINVAL or EDENIED.
func FuzzNarrow(f *testing.F) {
	for _, s := range []string{
		`{"drop":["pii:alice"]}`, `{"project":["fields.a"]}`, `{"drop":["pii:bob"]}`, `{"project":["fields.c"]}`,
		`{"drop":[""]}`, `{"nonsense":1}`, `{}`, `{"drop":[]}`, `{"project":[]}`, `{"project":null}`, `[`,
	} {
		f.Add(uint8(0), []byte(s))
	}
	k := New()
	var parents []kindapi.Scope
	for _, spec := range []string{
		`{"drop":["pii:alice","financial:alice"],"project":["fields.a","fields.b"]}`, `{"drop":["pii:alice"]}`,
	} {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			f.Fatal(err)
		}
		parents = append(parents, s)
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		kerneltest.CheckNarrow(t, k, []kindapi.Scope{parents[int(which)%len(parents)]}, b, abi.EINVAL, abi.EDENIED)
	})
}

// FuzzInvoke: whatever the blob and the arguments, declassifying never
// panics; it drops only the scope's tags (and records what it dropped),
// and a projection keeps only the scope's paths.
func FuzzInvoke(f *testing.F) {
	for _, s := range []struct{ args, blob string }{
		{`{"blob":7}`, `{"id":"p","fields":{"passport":"X1","nationality":"PT"}}`},
		{`{"blob":7}`, `{"fields":"flat","missing":{"path":1}}`}, {`{"blob":7}`, `not json`}, {`{"blob":7}`, `[1]`},
		{`{"blob":7}`, `{"fields":{"nationality":{"deep":[1,2]}},"a":{"b":{"c":1}}}`}, {`{}`, `{}`}, {`[`, `{}`},
	} {
		f.Add(uint8(0), []byte(s.args), []byte(s.blob), "pii:alice,hr")
	}
	k := New()
	var scopes []*Scope
	for _, spec := range []string{
		`{"drop":["pii:alice"],"project":["fields.nationality","missing.path","a","a.b.c"]}`,
		`{"drop":["pii:alice","hr"]}`,
	} {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			f.Fatal(err)
		}
		scopes = append(scopes, s.(*Scope))
	}
	f.Fuzz(func(t *testing.T, which uint8, args, blob []byte, tags string) {
		s := scopes[int(which)%len(scopes)]
		in := kindapi.NewBlob(blob, kindapi.NewLabel(strings.Split(tags, ","), []string{"data:people"}))
		call := kindtest.NewCall(Op, args, s, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) {
			if h != 7 {
				return nil, kindapi.Errorf(abi.EBADHANDLE, "no blob %d", h)
			}
			return in, nil
		})
		res, err := kerneltest.Invoke(context.Background(), k, call)
		if err != nil {
			switch kindapi.ErrnoOf(err) {
			case abi.EINVAL, abi.EBADHANDLE:
			default:
				t.Fatalf("Invoke(%q, %q): errno %s (%v)", args, blob, kindapi.ErrnoOf(err), err)
			}
			return
		}
		for _, tag := range in.Label().Conf() {
			if kept := slices.Contains(res.Label.Conf(), tag); kept == slices.Contains(s.drop, tag) {
				t.Fatalf("Invoke: tag %q kept=%v with drop %v", tag, kept, s.drop)
			}
		}
		for _, tag := range res.Label.Conf() {
			if !slices.Contains(in.Label().Conf(), tag) {
				t.Fatalf("Invoke: tag %q added", tag)
			}
		}
		if !slices.Contains(res.Label.Integ(), "data:people") {
			t.Fatalf("Invoke: integrity taints %v lost data:people", res.Label.Integ())
		}
		if s.project == nil {
			if string(res.Data) != string(blob) {
				t.Fatalf("Invoke without a projection changed the blob")
			}
			return
		}
		var out map[string]any
		if err := json.Unmarshal(res.Data, &out); err != nil {
			t.Fatalf("projection %q is not an object: %v", res.Data, err)
		}
		var walk func(prefix string, v map[string]any)
		walk = func(prefix string, v map[string]any) {
			for key, e := range v {
				path := prefix + key
				if slices.Contains(s.project, path) {
					continue // everything under an allowed path may go
				}
				m, ok := e.(map[string]any)
				if !ok || !slices.ContainsFunc(s.project, func(p string) bool { return strings.HasPrefix(p, path+".") }) {
					t.Fatalf("projection %s of %q keeps %s, not in %v", res.Data, blob, path, s.project)
				}
				walk(path+".", m)
			}
		}
		walk("", out)
	})
}
