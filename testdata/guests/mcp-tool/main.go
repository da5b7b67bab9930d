// Command mcp-tool is the tool guest of the mcpserve tests: its input is
// the tool call's arguments, {"op": ...}:
//
//	echo {text}        result: text (or, with "json": true, {"echo": text})
//	read {owner}       result: the owner's record from the data capability "records"
//	fetch {path}       result: the body of GET path on the net capability "web"
//	post {path, body}  POST to the net capability "mail", body a string or a
//	                   reference ({"mandate_blob": HANDLE}, spliced unread)
//	plan {owner}       the owner's record, declassified through the
//	                   capability "declass" (never read here)
//	spin               never ends
//	delegate {text}    spawns its own module (the first of the spawn
//	                   capability "spawner"'s modules) to echo text, and
//	                   returns "child said: " and the child's result
package main

import (
	"encoding/json"
	"fmt"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

type blobRef struct {
	Handle abi.Handle `json:"mandate_blob"`
}

// args is the tool's input.
type args struct {
	Op    string          `json:"op"`
	Text  string          `json:"text"`
	JSON  bool            `json:"json"`
	Owner string          `json:"owner"`
	Path  string          `json:"path"`
	Body  json.RawMessage `json:"body"`
}

// init decodes an input once, so that encoding/json's decoder for args is
// built here: init runs once per module, before its snapshot, and main on
// every task. Built in main, it cost each task about 0.6 ms of its 0.75
// (BENCHMARKS.md, "An MCP tool call").
func init() {
	var a args
	json.Unmarshal([]byte(`{"op":""}`), &a)
}

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		fail(err)
	}
	var a args
	if err := json.Unmarshal(in, &a); err != nil {
		fail(err)
	}
	switch a.Op {
	case "echo":
		if a.JSON {
			b, _ := json.Marshal(map[string]string{"echo": a.Text})
			mandate.SetResult(b)
			return
		}
		mandate.SetResult([]byte(a.Text))
	case "read":
		c := lookup("records")
		args, _ := json.Marshal(map[string]any{"owner": a.Owner})
		b, err := c.Call("read", args)
		if err != nil {
			fail(err)
		}
		mandate.SetResultBlob(b) // unread: the result carries the record's label
	case "plan":
		args, _ := json.Marshal(map[string]any{"owner": a.Owner})
		b, err := lookup("records").Call("read", args)
		if err != nil {
			fail(err)
		}
		d, err := lookup("declass").Call("declassify", []byte(fmt.Sprintf(`{"blob":%d}`, b.Handle())))
		if err != nil {
			fail(err)
		}
		mandate.SetResultBlob(d)
	case "fetch":
		resp, err := mnet.Fetch(lookup("web"), abi.HTTPRequest{Method: "GET", URL: a.Path})
		if err != nil {
			fail(err)
		}
		mandate.SetResult(resp.Body)
	case "post":
		req := abi.HTTPRequest{Method: "POST", URL: a.Path}
		var ref blobRef
		var text string
		switch {
		case json.Unmarshal(a.Body, &ref) == nil && ref.Handle != 0:
			req.BodyBlob = ref.Handle
		case json.Unmarshal(a.Body, &text) == nil:
			req.Body = []byte(text)
		default:
			fail(fmt.Errorf("body: a string or a reference"))
		}
		resp, err := mnet.Fetch(lookup("mail"), req)
		if err != nil {
			fail(err)
		}
		mandate.SetResult([]byte(fmt.Sprintf("sent: %d", resp.Status)))
	case "spin":
		for {
		}
	case "delegate":
		sp := lookup("spawner")
		desc, err := sp.Describe()
		if err != nil {
			fail(err)
		}
		var d struct {
			Scope struct {
				Modules []string `json:"modules"`
			} `json:"scope"`
		}
		if err := json.Unmarshal(desc, &d); err != nil || len(d.Scope.Modules) == 0 {
			fail(fmt.Errorf("the spawner names no module: %s", desc))
		}
		in, _ := json.Marshal(map[string]string{"op": "echo", "text": a.Text})
		msg, err := mandate.NewBlob(in)
		if err != nil {
			fail(err)
		}
		child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: d.Scope.Modules[0], Input: msg.Handle(), Timeout: "20s"})
		if err != nil {
			fail(err)
		}
		res, err := child.Wait()
		if err != nil {
			fail(err)
		}
		b, err := res.Bytes()
		if err != nil {
			fail(err)
		}
		mandate.SetResult(append([]byte("child said: "), b...))
	default:
		fail(fmt.Errorf("unknown op %q", a.Op))
	}
}

func lookup(name string) mandate.Cap {
	c, err := mandate.Lookup(name)
	if err != nil {
		fail(err)
	}
	return c
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mcp-tool:", err)
	os.Exit(1)
}
