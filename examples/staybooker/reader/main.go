// Command reader reads one listing for the stay booker, as a child task
// holding only that listing's page and a quarantined model, and no input:
// it splices
// the page into the model's prompt without reading it, and hands back
// only what a closed schema allows (a rating, whether there is wifi),
// which the kernel validated and endorsed. Whatever the page's reviews
// say, nothing an attacker phrased can reach the planner.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/llm"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

// summary is the closed schema of what a reader may say.
const summary = `{"type":"object","additionalProperties":false,"required":["rating","wifi"],
 "properties":{"rating":{"type":"integer","minimum":1,"maximum":5},"wifi":{"type":"boolean"}}}`

func main() {
	page, err := mandate.Lookup("page")
	if err != nil {
		fail(err)
	}
	model, err := mandate.Lookup("model")
	if err != nil {
		fail(err)
	}
	// Which listing: the one path the page capability allows. The reader
	// takes no input from the planner (whose label carries what it read):
	// it starts clean, and stays so.
	var desc struct {
		Scope struct {
			Paths []string `json:"paths"`
		} `json:"scope"`
	}
	if b, err := page.Describe(); err != nil || json.Unmarshal(b, &desc) != nil || len(desc.Scope.Paths) != 1 {
		fail(fmt.Errorf("the page capability does not name one listing"))
	}
	path := desc.Scope.Paths[0]
	id := strings.TrimPrefix(path, "/listing/")
	doc, err := mnet.FetchBlob(page, abi.HTTPRequest{Method: "GET", URL: path})
	if err != nil {
		fail(err)
	}
	resp, err := llm.Extract(model, abi.ChatRequest{
		Messages: []abi.ChatMessage{
			{Role: "system", Content: "Rate the listing from 1 to 5 from its reviews, and say whether it has wifi."},
			{Role: "user", Content: "Listing " + id + ":\n" + abi.SplicePlaceholder(0)},
		},
		Splice:         []abi.Handle{doc.Handle()},
		ResponseFormat: &abi.ResponseFormat{Type: "json_schema", JSONSchema: &abi.JSONSchemaFormat{Name: "summary", Schema: json.RawMessage(summary), Strict: true}},
	})
	if err != nil {
		fail(err)
	}
	mandate.SetResult([]byte(resp.Message.Content))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "reader:", err)
	os.Exit(1)
}
