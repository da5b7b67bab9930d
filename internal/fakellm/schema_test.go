package fakellm

import (
	"strings"
	"testing"
)

func TestSchemaAnswer(t *testing.T) {
	tests := []struct {
		name, schema string
		violate      bool
		want         string
	}{
		{"allOf merges", `{"allOf":[{"type":"object","properties":{"a":{"type":"boolean"}}},{"properties":{"b":{"enum":[3,4]}}}],"additionalProperties":false}`,
			false, `{"a":true,"b":3}`},
		{"anyOf takes the first", `{"type":"object","additionalProperties":false,"properties":{"v":{"anyOf":[{"type":"integer","maximum":-2},{"type":"string"}]}}}`,
			false, `{"v":-2}`},
		{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, false, `{"injected":0}`},
		{"property named injected", `{"type":"object","properties":{"injected":{"type":"boolean"}}}`, false, `{"_injected":"P","injected":true}`},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"boolean"},{"const":"c"}],"items":false}`, false, `[true,"c"]`},
		{"maxItems 0", `{"type":"array","maxItems":0}`, false, `[]`},
		{"minLength pads", `{"type":"string","minLength":3}`, false, `"Pxx"`},
		{"draft-4 exclusive bounds", `{"type":"integer","minimum":5,"exclusiveMinimum":true}`, false, `6`},
		{"number below 0", `{"type":"number","maximum":-0.5}`, false, `-0.5`},
		{"false schema", `{"type":"object","additionalProperties":false,"properties":{"x":false}}`, false, `{"x":null}`},
		{"a cycle ends in null", `{"$ref":"#/$defs/n","$defs":{"n":{"type":"object","additionalProperties":false,"properties":{"next":{"$ref":"#/$defs/n"}}}}}`,
			false, `{"next":null}`},
		{"unresolvable ref is free", `{"$ref":"https://x.example/s.json"}`, false, `"P"`},
		{"violating a free string is still a string", `{"type":"string"}`, true, `"P"`},
		{"violating arrays", `{"type":"array","items":{"type":"boolean"}}`, true, `["P"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(schemaAnswer(ptr(schemaReq(tt.schema)), "P", tt.violate))
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSchemaBranching: a schema that branches at every level cannot make
// an answer explode.
func TestSchemaBranching(t *testing.T) {
	s := `{"$defs":{"t":{"type":"object","additionalProperties":false,"properties":{
		"a":{"type":"array","minItems":50,"items":{"$ref":"#/$defs/u"}},
		"b":{"type":"array","minItems":50,"items":{"$ref":"#/$defs/u"}}}},
		"u":{"type":"object","additionalProperties":false,"properties":{
		"c":{"type":"array","minItems":50,"items":{"$ref":"#/$defs/v"}}}},
		"v":{"type":"array","minItems":50,"items":{"type":"string"}}},
		"$ref":"#/$defs/t"}`
	got := schemaAnswer(ptr(schemaReq(s)), strings.Repeat("P", 100), false)
	if len(got) > 2<<20 {
		t.Errorf("answer of %d bytes", len(got))
	}
}

func FuzzSchemaAnswer(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"string","maxLength":1e300,"minLength":-3}}}`, false)
	f.Add(`{"type":"array","minItems":1e9,"items":{"$ref":"#"}}`, true)
	f.Add(`{"allOf":[{"$ref":"#/x"},true],"enum":[]}`, false)
	f.Fuzz(func(t *testing.T, schema string, violate bool) {
		schemaAnswer(ptr(schemaReq(schema)), "payload", violate)
	})
}
