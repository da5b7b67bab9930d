package manifest

import (
	goparser "go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestGrammarIsComplete: Grammar names every block and attribute Load
// accepts (the schemas and the kernel's cap attributes), and the package
// doc's Grammar section is Grammar, line for line.
func TestGrammarIsComplete(t *testing.T) {
	named := func(name string, block bool) bool {
		pat := `(?m)^\s*` + regexp.QuoteMeta(name) + `\s*=`
		if block {
			pat = `(?m)^\s*` + regexp.QuoteMeta(name) + `\s*("[^"]*"\s*)*\{`
		}
		return regexp.MustCompile(pat).MatchString(Grammar)
	}
	for _, s := range []*hcl.BodySchema{rootSchema, taskSchema, seedSchema, limitsSchema, resultSchema} {
		for _, a := range s.Attributes {
			if !named(a.Name, false) {
				t.Errorf("Grammar does not name attribute %q", a.Name)
			}
		}
		for _, b := range s.Blocks {
			if !named(b.Type, true) {
				t.Errorf("Grammar does not name block %q", b.Type)
			}
		}
	}
	for a := range kernelAttrs {
		if !named(a, false) {
			t.Errorf("Grammar does not name the kernel's cap attribute %q", a)
		}
	}

	f, err := goparser.ParseFile(token.NewFileSet(), "doc.go", nil, goparser.ParseComments|goparser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	var want strings.Builder
	for _, l := range strings.Split(strings.TrimRight(Grammar, "\n"), "\n") {
		if l != "" {
			want.WriteString("\t" + l)
		}
		want.WriteString("\n")
	}
	if !strings.Contains(doc, want.String()) {
		t.Errorf("the package doc's grammar is not Grammar; want it to hold:\n%s", want.String())
	}
}
