package net

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// partsCall is a call whose blob handle 1 is a bank's transactions, the
// sender field labelled apart from the free-text subject.
func partsCall(t *testing.T) *kindapi.Call {
	t.Helper()
	doc := []byte(`{"transactions":[{"sender":"GB29NWBK60161331926819","subject":"\", \"amount\": 9999, \"x\": \"","amount":10}]}`)
	b, err := kindapi.NewBlobParts(doc, kindapi.NewLabel(nil, []string{"bank:tx"}),
		[]kindapi.PartLabel{{Pattern: "$.transactions[*].sender", Label: kindapi.NewLabel(nil, []string{"bank:transactions.sender"})}})
	if err != nil {
		t.Fatal(err)
	}
	var c kindapi.Call
	c.Init("fetch", nil, nil, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) {
		if h != 1 {
			return nil, kindapi.ErrBadHandle
		}
		return b, nil
	}, func() kindapi.Label { return kindapi.Label{} })
	return &c
}

// TestSpliceParts: a part goes in as a whole JSON value where its
// placeholder is a whole string (the hostile subject cannot break out of
// its field), carries its own label, and is recorded with where it came
// from; misplaced placeholders are refused.
func TestSpliceParts(t *testing.T) {
	c := partsCall(t)
	r := abi.HTTPRequest{Method: "POST", URL: "/pay",
		Body:        []byte(`{"recipient":"{{mandate:part:0}}","note":"{{mandate:part:1}}","amount":10}`),
		SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$.transactions[0].sender"}, {Blob: 1, Path: "$.transactions[0].subject"}}}
	prov, err := spliceParts(c, &r)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("body %s: %v", r.Body, err)
	}
	if got["recipient"] != "GB29NWBK60161331926819" || got["amount"] != 10.0 || len(got) != 3 {
		t.Errorf("body %s", r.Body)
	}
	src := prov["request.body.recipient"]
	if src.Path != "$.transactions[0].sender" || len(src.Label.Integ()) != 1 || src.Label.Integ()[0] != "bank:transactions.sender" {
		t.Errorf("provenance of the recipient: %+v", src)
	}
	if note := prov["request.body.note"]; note.Label.Integ()[0] != "bank:tx" {
		t.Errorf("provenance of the note: %+v", note)
	}
	// The kernel checks the parts, not the blob, against the sink.
	if n := c.NumSpliced(); n != 2 || c.SplicedAt(0).Label().Integ()[0] != "bank:transactions.sender" {
		t.Errorf("spliced %d, first labelled %v", n, c.SplicedAt(0).Label())
	}
	for name, r := range map[string]abi.HTTPRequest{
		"inside a longer string": {Body: []byte(`{"a":"x{{mandate:part:0}}"}`), SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$"}}},
		"in the URL":             {URL: "/p?x={{mandate:part:0}}", Body: []byte(`{}`), SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$"}}},
		"naming no part":         {Body: []byte(`{"a":"{{mandate:part:3}}"}`), SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$"}}},
		"no parts":               {Body: []byte(`{"a":"{{mandate:part:0}}"}`)},
		"not JSON":               {Body: []byte(`a={{mandate:part:0}}`), SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$"}}},
		"a missing field":        {Body: []byte(`{"a":"{{mandate:part:0}}"}`), SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$.nope"}}},
		"a wildcard":             {Body: []byte(`{"a":"{{mandate:part:0}}"}`), SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$.transactions[*]"}}},
		"a bad handle":           {Body: []byte(`{"a":"{{mandate:part:0}}"}`), SpliceParts: []abi.SplicePart{{Blob: 7, Path: "$"}}},
		"with whole blobs":       {Body: []byte(`{"a":"{{mandate:part:0}}","b":"{{mandate:splice:0}}"}`), Splice: []abi.Handle{1}, SpliceParts: []abi.SplicePart{{Blob: 1, Path: "$"}}},
	} {
		r := r
		err := checkPartsBody(&r)
		if err == nil {
			_, err = spliceParts(partsCall(t), &r)
		}
		if err == nil {
			t.Errorf("%s: spliced", name)
		} else if e := new(kindapi.Error); !errors.As(err, &e) {
			t.Errorf("%s: %v is not a kernel error", name, err)
		}
	}
}
