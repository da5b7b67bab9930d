package agent_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/agent"
)

type address struct {
	Street string  `json:"street" jsonschema:"street and number"`
	City   string  `json:"city"`
	Zip    *string `json:"zip"`
}

type base struct {
	ID string `json:"id"`
}

type item struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price,omitzero"`
}

type order struct {
	base     // flattened, as encoding/json does
	Customer struct {
		Name  string `json:"name"`
		Email string `json:"email,omitempty"`
	} `json:"customer"`
	Ship     address           `json:"ship"`
	Bill     *address          `json:"bill" jsonschema:"billing address; the shipping one when left out"`
	Items    []item            `json:"items"`
	Seats    [2]string         `json:"seats"`
	Tags     map[string]string `json:"tags,omitempty"`
	Quantity uint16            `json:"quantity"`
	When     time.Time         `json:"when"`
	Doc      agent.BlobRef     `json:"doc" jsonschema:"the document"`
	Docs     []agent.BlobRef   `json:"docs,omitempty"`
	Extra    json.RawMessage   `json:"extra,omitempty"`
	Count    int64             `json:"count,string"`
	Photo    []byte            `json:"photo,omitempty"`
	Any      any               `json:"any,omitempty"`
	Skip     string            `json:"-"`
	//lint:ignore U1000 an unexported field the schema must leave out
	hidden   int
	Untagged bool
}

const orderSchema = `{"type":"object","properties":{` +
	`"id":{"type":"string"},` +
	`"customer":{"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string"}},"required":["name"],"additionalProperties":false},` +
	`"ship":{"type":"object","properties":{"street":{"type":"string","description":"street and number"},"city":{"type":"string"},"zip":{"type":["string","null"]}},"required":["street","city"],"additionalProperties":false},` +
	`"bill":{"type":["object","null"],"description":"billing address; the shipping one when left out","properties":{"street":{"type":"string","description":"street and number"},"city":{"type":"string"},"zip":{"type":["string","null"]}},"required":["street","city"],"additionalProperties":false},` +
	`"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"},"price":{"type":"number"}},"required":["sku","qty"],"additionalProperties":false}},` +
	`"seats":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2},` +
	`"tags":{"type":"object","additionalProperties":{"type":"string"}},` +
	`"quantity":{"type":"integer","minimum":0,"maximum":65535},` +
	`"when":{"type":"string","format":"date-time"},` +
	`"doc":{"type":"string","description":"the document (a reference: the \"$name\" a tool returned as {\"ref\":\"$name\"})"},` +
	`"docs":{"type":"array","items":{"type":"string","description":"a reference: the \"$name\" a tool returned as {\"ref\":\"$name\"}"}},` +
	`"extra":{},` +
	`"count":{"type":"string"},` +
	`"photo":{"type":"string","format":"byte"},` +
	`"any":{},` +
	`"Untagged":{"type":"boolean"}` +
	`},"required":["id","customer","ship","items","seats","quantity","when","doc","count","Untagged"],"additionalProperties":false}`

func TestSchemaOfNestedTypes(t *testing.T) {
	got, err := agent.SchemaOf[order]()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != orderSchema {
		t.Errorf("schema:\n%s\nwant:\n%s", got, orderSchema)
	}
	// It is a JSON Schema another implementation reads.
	var s jsonschema.Schema
	if err := json.Unmarshal(got, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(nil); err != nil {
		t.Fatalf("jsonschema-go cannot resolve the schema: %v", err)
	}
}

// TestValidationAgreesWithJSONSchema: the arguments the loop refuses are
// the ones a JSON Schema validator refuses against the schema the model
// was shown, and the others decode.
func TestValidationAgreesWithJSONSchema(t *testing.T) {
	type args struct {
		Name  string            `json:"name"`
		Ship  address           `json:"ship"`
		Items []item            `json:"items"`
		Seats [2]string         `json:"seats"`
		Tags  map[string]string `json:"tags,omitempty"`
		Bags  int8              `json:"bags"`
		Note  *string           `json:"note"`
		Gift  bool              `json:"gift,omitempty"`
	}
	raw, err := agent.SchemaOf[args]()
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"name":"a","ship":{"street":"s","city":"c","zip":null},"items":[{"sku":"x","qty":1}],"seats":["1A","1B"],"bags":1,"note":null}`
	docs := []string{
		good,
		strings.Replace(good, `"note":null`, `"note":"hi","gift":true,"tags":{"k":"v"}`, 1),
		strings.Replace(good, `"zip":null`, `"zip":"1000"`, 1),
		strings.Replace(good, `"bags":1`, `"bags":-128`, 1),
		strings.Replace(good, `"items":[{"sku":"x","qty":1}]`, `"items":[]`, 1),
		strings.Replace(good, `"qty":1`, `"qty":1,"price":2.5`, 1),
		strings.Replace(good, `"bags":1`, `"bags":128`, 1),
		strings.Replace(good, `"bags":1`, `"bags":1.5`, 1),
		strings.Replace(good, `"name":"a"`, `"name":1`, 1),
		strings.Replace(good, `"name":"a",`, ``, 1),
		strings.Replace(good, `"name":"a"`, `"name":null`, 1),
		strings.Replace(good, `"name":"a"`, `"name":"a","x":1`, 1),
		strings.Replace(good, `"zip":null`, `"zip":null,"country":"PT"`, 1),
		strings.Replace(good, `"qty":1`, `"qty":"1"`, 1),
		strings.Replace(good, `["1A","1B"]`, `["1A","1B","1C"]`, 1),
		strings.Replace(good, `"tags"`, `"tags"`, 1) + "",
		strings.Replace(good, `"note":null`, `"note":null,"tags":{"k":1}`, 1),
		strings.Replace(good, `"note":null`, `"note":null,"gift":null`, 1),
		strings.Replace(good, `"items":[{"sku":"x","qty":1}]`, `"items":null`, 1),
		`[]`, `"x"`, `null`, `{}`,
	}
	for _, doc := range docs {
		var inst any
		if err := json.Unmarshal([]byte(doc), &inst); err != nil {
			t.Fatal(err)
		}
		want := rs.Validate(inst) == nil
		ran := false
		tool := agent.Tool("t", "", func(*agent.Ctx, args) (string, error) { ran = true; return "ok", nil })
		m := &script{t: t, replies: []reply{calls(call("1", "t", doc)), text("done")}}
		if _, err := agent.RunWith(m, agent.Config{User: "x", Tools: []agent.ToolDef{tool}, OnStep: quiet}); err != nil {
			t.Fatal(err)
		}
		if ran != want {
			t.Errorf("%s: jsonschema-go says valid=%v, the loop ran the tool=%v (%s)", doc, want, ran, toolMessages(m.reqs[1])["1"])
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	type recursive struct {
		Name     string       `json:"name"`
		Children []*recursive `json:"children"`
	}
	type withChan struct {
		C chan int `json:"c"`
	}
	type withBlob struct {
		B mandate.Blob `json:"b"`
	}
	type withRef struct {
		R agent.Reference `json:"r"`
	}
	type withFunc struct{ F func() }
	for name, def := range map[string]agent.ToolDef{
		"recursive is recursive": agent.Tool("t", "", func(*agent.Ctx, recursive) (string, error) { return "", nil }),
		"chan int has no JSON":   agent.Tool("t", "", func(*agent.Ctx, withChan) (string, error) { return "", nil }),
		"use agent.BlobRef":      agent.Tool("t", "", func(*agent.Ctx, withBlob) (string, error) { return "", nil }),
		"is for results":         agent.Tool("t", "", func(*agent.Ctx, withRef) (string, error) { return "", nil }),
		"func() has no JSON":     agent.Tool("t", "", func(*agent.Ctx, withFunc) (string, error) { return "", nil }),
		"must be a struct":       agent.Tool("t", "", func(*agent.Ctx, string) (string, error) { return "", nil }),
		"no function":            agent.Tool[struct{}, string]("t", "", nil),
		"tool name":              agent.Tool("no spaces", "", func(*agent.Ctx, struct{}) (string, error) { return "", nil }),
		"make tools with":        {Name: "raw"},
	} {
		m := &script{t: t}
		_, err := agent.RunWith(m, agent.Config{User: "x", Tools: []agent.ToolDef{def}, OnStep: quiet})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
		if len(m.reqs) != 0 {
			t.Errorf("%s: the model was asked", name)
		}
	}
	ok := agent.Tool("t", "", func(*agent.Ctx, struct{}) (string, error) { return "", nil })
	if _, err := agent.RunWith(&script{t: t}, agent.Config{User: "x", Tools: []agent.ToolDef{ok, ok}, OnStep: quiet}); err == nil || !strings.Contains(err.Error(), "two tools named t") {
		t.Errorf("duplicate tools: %v", err)
	}
	if string(ok.Parameters) != `{"type":"object","properties":{},"additionalProperties":false}` {
		t.Errorf("no parameters: %s", ok.Parameters)
	}
	if got, err := agent.SchemaOf[map[string][]int](); err != nil || !bytes.Equal(got, []byte(`{"type":"object","additionalProperties":{"type":"array","items":{"type":"integer"}}}`)) {
		t.Errorf("a map: %s %v", got, err)
	}
}

// TestSchemaFollowsEncodingJSON: the properties are the ones
// encoding/json fills: embedded structs flatten, a shallower field hides a
// deeper one, two at one depth hide each other, a tagged one wins a tie.
func TestSchemaFollowsEncodingJSON(t *testing.T) {
	type inner struct {
		A string `json:"a"`
		B string `json:"b"`
		C string
	}
	type other struct {
		C  string
		Dx string `json:"D"`
	}
	type tagged struct {
		D string // hidden by other's tagged D
	}
	type Named struct {
		X int `json:"x"`
	}
	type outer struct {
		inner
		other
		*tagged
		Named `json:"named"`
		A     int `json:"a"` // hides inner's a
	}
	got, err := agent.SchemaOf[outer]()
	if err != nil {
		t.Fatal(err)
	}
	// Properties come in the order their names first appear.
	want := `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"D":{"type":"string"},` +
		`"named":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}},` +
		`"required":["a","b","D","named"],"additionalProperties":false}`
	if string(got) != want {
		t.Errorf("schema:\n%s\nwant:\n%s", got, want)
	}
	// And encoding/json agrees on which fields exist.
	var v outer
	dec := json.NewDecoder(strings.NewReader(`{"a":1,"b":"x","D":"y","named":{"x":2}}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Errorf("encoding/json: %v", err)
	}
	dec = json.NewDecoder(strings.NewReader(`{"C":"x"}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err == nil {
		t.Errorf("encoding/json fills C, which the schema hides")
	}
}
